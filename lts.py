"""Run lts from a checkout without installing: ``python lts.py search moe1.6t h100_dgx``."""
from lts.cli import main

if __name__ == "__main__":
    main()
