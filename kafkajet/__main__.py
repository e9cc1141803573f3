from kafkajet.cli import main

raise SystemExit(main())
