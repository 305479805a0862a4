"""`dpsql shell`: an interactive SQL shell with DP answers, error bars and the budget in view.

- `app`: the `Shell` (meta commands, SQL, output), `main`, the demo database;
- `commands`: the meta commands (`.tables`, `.budget`, `.output`, ...), a registry by name;
- `input`: line editing, completion and highlighting (prompt_toolkit);
- `runner`: running a statement so that Ctrl-C cancels it without charging;
- `schema`: what `.tables` and `.schema` show.
"""

from dpsql.interfaces.shell.app import EXIT_INTERRUPTED, Shell, demo_database, demo_paths, main, open_connection

__all__ = ["EXIT_INTERRUPTED", "Shell", "demo_database", "demo_paths", "main", "open_connection"]
