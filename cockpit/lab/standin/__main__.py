from cockpit.lab.standin.server import main

raise SystemExit(main())
