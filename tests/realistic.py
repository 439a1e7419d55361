"""Realistic memory entries, to fill memory.md and user.md to their limits for proof 4.

Token counts depend on the text: numbered filler or runs of one letter tokenize worse
than the sentences an assistant actually saves, so the proof fills the files with
sentences of that kind, cut to fit exactly.
"""

from __future__ import annotations

import entries

MEMORY = [
    "The quarterly report is due on the first Friday of each quarter; drafts go to Priya.",
    "The home server runs Debian 12; backups go to the NAS at 02:00 and are kept 30 days.",
    "Project Heron launched on 2026-09-14; the launch window for Heron 2 moved to Thursday.",
    "The team standup is at 09:30 Berlin time on weekdays, on the usual video link.",
    "Invoices are paid from the business account; the accountant is Jonas Weber.",
    "The garden irrigation runs 06:00 and 20:00 from May to September, off in winter.",
    "Flight to Lisbon booked for 12 December, returning 3 January; seat 14A both ways.",
    "The car's next service is due at 90,000 km or in March, whichever comes first.",
    "Notes live in ~/notes, one Markdown file per project, named after the project.",
    "The domain example.net renews on 1 August; DNS is managed at the registrar.",
    "Dentist: Dr. Okafor, every six months; the last visit was in October.",
    "The book club meets the last Tuesday of the month; next title: The Left Hand of Darkness.",
    "Sourdough starter is fed on Sundays; the recipe that worked uses 75% hydration.",
    "The printer on the second floor needs toner model TN-2420; two spares in the cupboard.",
    "Taxes are filed in April with Jonas; receipts are scanned into ~/notes/tax-2026.",
    "The VPN config for travel is in ~/notes/vpn.md; it needs the hardware key.",
    "Grandmother's birthday is 22 May; she likes orchids and handwritten cards.",
    "The house insurance policy renews in February; the broker is Ana Costa.",
    "Weekly review on Fridays at 16:00: open loops, calendar, next week's three goals.",
    "The piano tuner comes each spring; the piano is a 1978 Yamaha U1.",
    "Running plan: 5 km Tuesday and Thursday, long run Sunday, rest after races.",
    "The electricity tariff changes in January; compare offers in December.",
    "Friends Tom and Ines are vegetarian; Ines is allergic to walnuts.",
    "The old laptop is kept for scanning; it is too slow for anything else.",
    "Library books are due back every three weeks; renew online with the card number.",
]

USER = [
    "The owner's name is Ada; she prefers to be addressed by first name.",
    "Prefers short answers with the conclusion first, and sources when facts matter.",
    "Works in UTC for anything written down; lives in Berlin (Europe/Berlin).",
    "Writes in English; reads German and Portuguese; replies in English unless asked.",
    "Dislikes exclamation marks and filler; likes plain, direct wording.",
    "Is a backend engineer; comfortable with Python, SQL and the Linux shell.",
    "Mornings are for deep work: no reminders before 11:00 unless urgent.",
    "Prefers metric units and 24-hour time, dates as YYYY-MM-DD.",
    "Wants to be asked before anything is sent, booked or paid on her behalf.",
    "Keeps a paper notebook too; summaries should fit on one page.",
    "Coffee: black, no sugar; tea in the afternoon.",
    "Cycles to work when it is dry; checks the weather the night before.",
    "Values privacy: never share details about family without asking first.",
    "Learning Portuguese: likes a word of the day when it fits naturally.",
    "Vacations are planned as slow travel, by train where possible.",
]


def fill_entries(limit: int, file: str) -> list[str]:
    """Distinct realistic entries whose file text is exactly `limit` characters."""
    pool = MEMORY if file == "memory" else USER
    chosen: list[str] = []
    for entry in pool * 4:
        candidate = entry if entry not in chosen else f"{entry} (again, {len(chosen)})"
        if entries.chars([*chosen, candidate]) > limit:
            room = limit - entries.chars(chosen) - 3
            if room > 0:
                chosen.append(candidate[:room].rstrip() or candidate[:room])
            break
        chosen.append(candidate)
    text_length = entries.chars(chosen)
    if text_length < limit and chosen:  # pad the last entry with a short clause
        chosen[-1] = (chosen[-1] + " Noted." * limit)[: len(chosen[-1]) + limit - text_length]
    return chosen
