"""brokerd: grants, decisions, owner approvals, the audit log and tool runtimes."""
