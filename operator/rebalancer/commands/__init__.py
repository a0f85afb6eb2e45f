"""Subcommands of `rebalancer`. Each module exposes `add_parser(subparsers)` and `run(args)`.

`add_parser` must call `parser.set_defaults(command_module=sys.modules[__name__])`. `extras`
is not a subcommand: it checks the optional dependencies a subcommand needs before its imports.
"""
