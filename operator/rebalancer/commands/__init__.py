"""Subcommands of `rebalancer`. Each module exposes `add_parser(subparsers)` and `run(args)`.

`add_parser` must call `parser.set_defaults(command_module=sys.modules[__name__])`.
"""
