"""A scaled-down size that sizes no input and saved nothing is put back to the problem's own
value (task/kernelbench_sizes.restored): a classifier's class count behind large fixed
weights (KernelBench's VGGs: 20 logits let a constant output pass at random) — and not a
convolution's channel count, whose output grows with it."""

from __future__ import annotations

from pathlib import Path

from kernelloop.task.kernelbench_sizes import restored, scaled

CLASSIFIER = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.body = nn.Linear(64, 1024)
        self.fixed = nn.Linear(1024, 1024)  # 1M weights no size moves
        self.squeeze = nn.Linear(1024, 16)
        self.head = nn.Linear(16, num_classes)

    def forward(self, x):
        h = torch.relu(self.fixed(torch.relu(self.body(x))))
        return self.head(torch.relu(self.squeeze(h)))


batch_size = 64
num_classes = 1000


def get_inputs():
    return [torch.rand(batch_size, 64)]


def get_init_inputs():
    return [num_classes]
"""

CONV = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(3, out_channels, 1)

    def forward(self, x):
        return self.conv(x).amax(dim=(1, 2, 3))


batch_size = 16
out_channels = 64
height = 32
width = 32


def get_inputs():
    return [torch.rand(batch_size, 3, height, width)]


def get_init_inputs():
    return [out_channels]
"""


def _problem(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_class_count_behind_fixed_weights_is_put_back_and_the_batch_is_not(tmp_path):
    path = _problem(tmp_path, "classifier.py", CLASSIFIER)
    full = {"batch_size": 64, "num_classes": 1000}
    small = scaled(path, full, 1 << 12)
    # The fixed 1024x1024 weight keeps every tensor over the budget: both sizes halve to 2.
    assert small == {"batch_size": 2, "num_classes": 2}, small
    # 16 x 998 more weights and 2 x 998 more logits are ~2% of what one forward touches;
    # the batch sizes the input, which is what the CPU shape is for.
    assert restored(path, full, small) == {"batch_size": 2, "num_classes": 1000}


def test_a_convolutions_channel_count_is_not_put_back(tmp_path):
    path = _problem(tmp_path, "conv.py", CONV)
    full = {"batch_size": 16, "out_channels": 64, "height": 32, "width": 32}
    small = scaled(path, full, 1 << 12)
    assert small == {"batch_size": 8, "out_channels": 8, "height": 8, "width": 16}, small
    # No input changes with out_channels, and its weights (3 x 56 more) and the output
    # (one value per image) barely do: counted alone they would grow under 10%. The
    # convolution's own output grows 8x with it, and that is what a forward costs.
    assert restored(path, full, small) == small
