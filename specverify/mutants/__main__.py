import os
import sys

from .command import main

code = main()
if code == 130:  # interrupted: the workers are dead; skip joining the pool's threads at exit
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
