"""`transformers` decoder layers as the programs efir compiles: built from a
config (random weights, no download), and wrapped so that one call is one
prefill or one decode step. Shared by python/tests/test_import_layers.py
(tiny configs) and bench/gpu/layers.py (full size). Needs torch and
transformers."""

import importlib

import torch
import transformers

# kind -> (config class, module, decoder layer, rotary embedding)
MODELS = {
    "llama": ("LlamaConfig", "llama", "LlamaDecoderLayer", "LlamaRotaryEmbedding"),
    "mistral": ("MistralConfig", "mistral", "MistralDecoderLayer", "MistralRotaryEmbedding"),
    "qwen2": ("Qwen2Config", "qwen2", "Qwen2DecoderLayer", "Qwen2RotaryEmbedding"),
}


def layer_and_rope(kind, impl="sdpa", **shape):
    """The config, the decoder layer (eval mode, seeded weights) and its
    rotary embedding for model `kind`, with the config's sizes `shape`."""
    cname, mod, lname, rname = MODELS[kind]
    m = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
    cfg = getattr(transformers, cname)(num_hidden_layers=1, attn_implementation=impl, **shape)
    torch.manual_seed(0)
    return cfg, getattr(m, lname)(cfg, 0).eval(), getattr(m, rname)(cfg)


class Prefill(torch.nn.Module):
    """The layer over a whole sequence (causal)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, cos, sin):
        return self.layer(x, position_embeddings=(cos, sin))


class Masked(Prefill):
    """The layer over a sequence with an additive attention mask."""

    def forward(self, x, cos, sin, mask):
        return self.layer(x, attention_mask=mask, position_embeddings=(cos, sin))


class Decode(torch.nn.Module):
    """One token through the layer with a cache holding `pk`, `pv`."""

    def __init__(self, cfg, layer):
        super().__init__()
        self.cfg, self.layer = cfg, layer

    def forward(self, x, cos, sin, pk, pv):
        cache = transformers.DynamicCache(config=self.cfg)
        cache.update(pk, pv, 0)
        return self.layer(x, position_embeddings=(cos, sin), cache=cache, use_cache=True)
