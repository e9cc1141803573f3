from kafkajet.cli.main import main

raise SystemExit(main())
