"""Function words: the words a question is made of that say nothing of what it asks about.

"What did Caroline say about the adoption agency?" finds the turn that answers it by
"Caroline", "adoption" and "agency"; "what", "did", "say", "about" and "the" match
thousands of turns, pull short filler ("Cool! What did it look like?") to the top, and
are the longest posting lists in the index (the slowest words to rank). The context
ranking leaves them out of the query.

Which words those are depends on the language, so the lists are per language and the
owner names theirs (`[recall] languages`, English by default). A list is short and
closed: articles, pronouns, auxiliaries, prepositions, conjunctions, question words and
the pieces a contraction splits into ("don't" is "don" and "t" to the index). Content
words are never on it, even frequent ones: "time", "work" and "like" stay in the query.

A word is compared folded (`proto.fold`: case and invisible characters), so "The" and
"THE" are one word. A word of a language without a list here, or of another script
(Cyrillic, Greek, CJK, Devanagari, …), is never left out: it is searched as it is. When
every word of a query is a function word ("who was he?"), the query keeps them all.
"""

from __future__ import annotations

from collections.abc import Iterable

import proto

__all__ = ["LANGUAGES", "content_terms", "function_words"]

_ENGLISH = """
a about above after again against all also am an and any are aren as at be because been
before being below between both but by can cannot could couldn did didn do does doesn
doing don down during each either else ever few for from further had hadn has hasn have
haven having he her here hers herself him himself his how however i if in into is isn it
its itself just let ll me might more most must mustn my myself neither no nor not now of
off on once only or other ought our ours ourselves out over own re s same shall shan she
should shouldn so some such t than that the their theirs them themselves then there these
they this those through to too under until up upon us ve very was wasn we were weren what
whatever when whenever where whether which while who whoever whom whose why will with
won would wouldn yet you your yours yourself yourselves d m o y
"""

_GERMAN = """
aber alle allem allen aller alles als also am an ander andere anderem anderen anderer
anderes auch auf aus bei bin bis bist da damit dann das dass dein deine deinem deinen
deiner dem den denn der des dessen deshalb die dies diese diesem diesen dieser dieses doch
dort du durch ein eine einem einen einer eines er es etwas euch euer eure für gegen
gewesen hab habe haben hat hatte hatten hier hin hinter ich ihm ihn ihnen ihr ihre ihrem
ihren ihrer ihres im in indem ins ist jede jedem jeden jeder jedes jene jenem jenen jener
jenes jetzt kann kein keine keinem keinen keiner können könnte man manche mein meine
meinem meinen meiner mich mir mit muss musste nach nicht nichts noch nun nur ob oder ohne
sehr sein seine seinem seinen seiner sich sie sind so solche soll sollte sondern sonst
über um und uns unser unsere unter vom von vor während war waren warst was weil welche
welchem welchen welcher welches wenn wer werde werden wie wieder will wir wird wirst wo
wollen wollte würde würden zu zum zur zwar zwischen
"""

_FRENCH = """
à ai aie aient aies ait as au aura aurai auraient aurais aurait auras aurez auriez aurions
aurons auront aux avaient avais avait avec avez aviez avions avons ayant ayez ayons c ce
ceci cela celà ces cet cette d dans de des du elle elles en es est et étaient étais était
étant été êtes étiez étions être eu eue eues eûmes eurent eus eut eux fûmes furent fus fut
il ils j je l la le les leur leurs lui m ma mais me même mes moi mon n ne nos notre nous on
ont ou où par pas pour qu que quel quelle quelles quels qui s sa sans se sera serai seraient
serais serait seras serez seriez serions serons seront ses si soi soient sois soit sommes
son sont soyez soyons suis sur t ta te tes toi ton tu un une vos votre vous y
"""

_SPANISH = """
a al algo algunas algunos ante antes como con contra cual cuando de del desde donde durante
e el él ella ellas ellos en entre era erais eran eras eres es esa esas ese eso esos esta
está estaba estaban estado estáis estamos están estar estas este esto estos estoy fue fueron
fui fuimos ha habéis había habían han has hasta hay he hemos la las le les lo los más me mi
mía mías mío míos mis mucho muchos muy nada ni no nos nosotras nosotros nuestra nuestras
nuestro nuestros o os otra otras otro otros para pero poco por porque que qué quien quién
quienes se sea sean ser si sí siendo sin sobre sois somos son soy su sus suya suyas suyo
suyos también tanto te tenéis tenemos tener tengo ti tiene tienen todo todos tu tú tus tuya
tuyas tuyo tuyos un una uno unos vosotras vosotros vuestra vuestras vuestro vuestros y ya yo
"""

LANGUAGES: dict[str, frozenset[str]] = {
    code: frozenset(proto.fold(word) for word in words.split())
    for code, words in (("en", _ENGLISH), ("de", _GERMAN), ("fr", _FRENCH), ("es", _SPANISH))
}
"""The function words of each language that has a list, by its ISO 639-1 code."""


def function_words(languages: Iterable[str]) -> frozenset[str]:
    """The function words of `languages` together (codes of `LANGUAGES`; others have none)."""
    found: set[str] = set()
    for code in languages:
        found |= LANGUAGES.get(code, frozenset())
    return frozenset(found)


def content_terms(terms: list[str], words: frozenset[str]) -> list[str]:
    """`terms` without the function words in `words`; all of them when that leaves none."""
    kept = [term for term in terms if proto.fold(term) not in words]
    return kept or terms
