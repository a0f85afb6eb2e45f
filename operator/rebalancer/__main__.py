from rebalancer.cli import main

raise SystemExit(main())
