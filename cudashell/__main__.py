from .frontends.entry import main

raise SystemExit(main())
