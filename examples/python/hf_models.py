"""Small random-weight transformers models of the four cache families kvferry.hf is tested on
(seeded: every process that builds one gets the same weights), and greedy decoding from a cache.
Needs transformers 5.x (not in Debian 12: the GPU machine's Python has it).

    kimi-linear   KimiLinearForCausalLM: KDA (conv q|k|v, fp32 recurrent) + MLA (latent, rope key)
    qwen3-next    Qwen3NextForCausalLM: gated delta net (conv q|k|v) + GQA attention
    granite-hybrid GraniteMoeHybridForCausalLM: Mamba2 (conv x|B|C, ssm) + GQA attention
    nemotron-h    NemotronHForCausalLM: the same families' second Mamba2 hybrid
    llama         LlamaForCausalLM: plain GQA"""
import torch

COMMON = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=16384, tie_word_embeddings=False,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)

FAMILIES = {
    "kimi-linear": ("KimiLinear", dict(
        COMMON, num_hidden_layers=4, num_key_value_heads=4, moe_intermediate_size=64,
        num_experts=4, num_experts_per_tok=2, first_k_dense_replace=4, kv_lora_rank=64,
        q_lora_rank=None, qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32,
        linear_num_heads=4, linear_head_dim=32, linear_conv_kernel_dim=4,
        layer_types=["linear_attention", "linear_attention", "linear_attention",
                     "full_attention"])),
    "qwen3-next": ("Qwen3Next", dict(
        COMMON, num_hidden_layers=4, head_dim=32, moe_intermediate_size=64,
        shared_expert_intermediate_size=64,
        num_experts=4, num_experts_per_tok=2, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4,
        full_attention_interval=2)),
    "granite-hybrid": ("GraniteMoeHybrid", dict(
        COMMON, num_hidden_layers=4, num_local_experts=4, num_experts_per_tok=2,
        shared_intermediate_size=128, mamba_n_heads=8, mamba_d_head=32, mamba_n_groups=2,
        mamba_d_state=16, mamba_d_conv=4, mamba_expand=2,
        layer_types=["mamba", "attention", "mamba", "attention"])),
    "nemotron-h": ("NemotronH", dict(
        COMMON, num_hidden_layers=4, head_dim=32, mamba_num_heads=8, mamba_head_dim=32,
        n_groups=2, ssm_state_size=16, conv_kernel=4, expand=2, hybrid_override_pattern="M*M*",
        layers_block_type=["mamba", "attention", "mamba", "attention"])),
    "llama": ("Llama", dict(COMMON, num_hidden_layers=4, head_dim=32)),
}


def build(family, device="cpu", dtype=torch.bfloat16, seed=0):
    """(model, config): the family's small model, weights from torch.manual_seed(seed)."""
    import transformers
    cls_name, kw = FAMILIES[family]
    cfg = getattr(transformers, cls_name + "Config")(**kw)
    torch.manual_seed(seed)
    model = getattr(transformers, cls_name + "ForCausalLM")(cfg)
    return model.to(device=device, dtype=dtype).eval(), cfg


def new_cache(config):
    from transformers import DynamicCache
    return DynamicCache(config=config)


def prompt(seed, n, vocab=512):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, n), generator=g)


@torch.no_grad()
def prefill(model, config, ids):
    """(cache, first token, logits of the last position)."""
    cache = new_cache(config)
    dev = next(model.parameters()).device
    out = model(input_ids=ids.to(dev), past_key_values=cache, use_cache=True)
    last = out.logits[:, -1:]
    return cache, last.argmax(-1), last


@torch.no_grad()
def greedy(model, cache, first, steps):
    """Greedy decoding from a filled cache: ([token ids], [logits of each step])."""
    tok, toks, logits = first, [], []
    dev = next(model.parameters()).device
    tok = tok.to(dev)
    for _ in range(steps):
        out = model(input_ids=tok, past_key_values=cache, use_cache=True)
        lg = out.logits[:, -1:]
        tok = lg.argmax(-1)
        toks.append(int(tok))
        logits.append(lg.float().cpu())
    return toks, logits
