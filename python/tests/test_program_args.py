"""The program's arguments (efir.program.Args): which device they run on."""
import torch

from efir.program import Args, as_module, export


def test_zero_dim_cpu_input_moves_to_the_device_of_the_others():
    # torch.export lifts a constant tensor created in forward (Mistral's decoder
    # layer does) as a 0-d CPU tensor: efir.partial.chunked passes it to a chunk
    # as its first input, beside GPU tensors (the meta device stands in here).
    # The device must be the GPU's, as PyTorch would compute it.
    s, e = torch.tensor(2.0), torch.zeros(0)
    x = torch.randn(3, 4, device="meta")
    ep = export(as_module(lambda s, e, x: x * s + e.sum()), [s, e, x])
    got = Args(ep)([s, e, x])
    assert [t.device.type for t in got] == ["meta", "meta", "meta"]


def test_cpu_inputs_stay_on_the_cpu():
    s, x = torch.tensor(2.0), torch.randn(3, 4)
    ep = export(as_module(lambda s, x: x * s), [s, x])
    got = Args(ep)([s, x])
    assert got[0] is s and got[1] is x
