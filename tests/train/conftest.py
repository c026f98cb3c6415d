"""The training tests run torch on one thread, as the loaded 2-core CI machine wants."""

import torch

torch.set_num_threads(1)
