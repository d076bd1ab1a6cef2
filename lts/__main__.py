"""``python -m lts``."""
from lts.cli import main

main()
