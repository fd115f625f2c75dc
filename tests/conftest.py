import sys
from pathlib import Path

import torch

# tests/helpers.py is imported as a plain module by the test files.
sys.path.insert(0, str(Path(__file__).parent))
# Two cores: keep torch from oversubscribing them when pytest runs.
torch.set_num_threads(min(2, torch.get_num_threads()))
