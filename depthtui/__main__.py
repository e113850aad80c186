"""`python -m depthtui`: the same as the `depthtui` command."""

from depthtui.cli import main

main()
