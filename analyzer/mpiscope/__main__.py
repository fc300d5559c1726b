from mpiscope.cli import main

raise SystemExit(main())
