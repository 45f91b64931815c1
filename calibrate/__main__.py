"""`python -m calibrate`: the same as the `calibrate` console script."""

from calibrate.cli import main

main()
