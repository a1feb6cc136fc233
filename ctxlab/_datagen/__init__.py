"""Internals of `ctxlab.datasets`: text pools (`text`), the session machinery
(`script`), the turn scripts (`scenarios`) and the Claude Code record writer (`render`)."""
