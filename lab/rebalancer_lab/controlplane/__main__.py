"""`python -m rebalancer_lab.controlplane`: build the control plane now (or find it cached).

Prints the binary's path; `make controlplane` runs it so that tests and the lab start in seconds.
"""

from __future__ import annotations

import sys

from rebalancer_lab.controlplane.building import ControlPlaneBuildError, ensure_control_plane


def main() -> int:
    try:
        binary = ensure_control_plane()
    except ControlPlaneBuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(binary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
