"""The models' contract: shapes, padding, attention maps, overrides, registry."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest
import torch

from attnclf.errors import AttnclfError
from attnclf.models import MODELS, build_model, model_from_config
from attnclf.models import attention as attention_module
from attnclf.models.attention import (
    SCORES,
    AttentionPooling,
    EncoderBlock,
    MultiHeadSelfAttention,
    masked_mean,
    masked_pool,
    masked_softmax,
)
from attnclf.models.positional import positional_encoding

ALL = list(MODELS)
POOLS_BY_ATTENTION = ["bilstm-attn", "self-attn"]
HAS_SELF_ATTENTION = ["transformer-mean", "self-attn", "mha"]
VOCAB = 50

@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models gain nothing from intra-op threads, and on a busy machine each
    parallel op can wait a whole scheduler slice for its second thread (10x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# Small sizes keep the file fast; a model only takes the fields it has.
TINY = {"embed_dim": 16, "d_model": 16, "ff_dim": 32, "hidden_dim": 16, "attention_dim": 16, "dense_dim": 8, "heads": 2}


def tiny(name: str, **overrides):
    valid = {f.name for f in fields(MODELS[name].config_class)}
    config = {k: v for k, v in TINY.items() if k in valid}
    config.update(vocab_size=VOCAB, num_classes=3, max_len=64, **overrides)
    return build_model(name, **config).eval()


def batch(lengths=(7, 1, 4), seq=None, seed=0):
    """Right-padded random ids with pad id 0, and the matching bool mask."""
    generator = torch.Generator().manual_seed(seed)
    seq = seq or max(lengths)
    ids = torch.randint(1, VOCAB, (len(lengths), seq), generator=generator)
    mask = torch.arange(seq) < torch.tensor(lengths)[:, None]
    return ids.masked_fill(~mask, 0), mask


def pad_right(ids, mask, extra):
    return (
        torch.cat([ids, torch.zeros(ids.size(0), extra, dtype=ids.dtype)], dim=1),
        torch.cat([mask, torch.zeros(mask.size(0), extra, dtype=torch.bool)], dim=1),
    )


# ---------------------------------------------------------------- every model


@pytest.mark.parametrize("name", ALL)
def test_output_shapes(name):
    ids, mask = batch()
    out = tiny(name)(ids, mask)
    assert out.logits.shape == (3, 3)
    assert out.self_attentions is None
    if out.pooling_weights is not None:
        assert out.pooling_weights.shape == ids.shape


@pytest.mark.parametrize("name", ALL)
def test_which_models_pool_by_attention_and_have_self_attention(name):
    ids, mask = batch()
    out = tiny(name)(ids, mask, output_attentions=True)
    assert (out.pooling_weights is not None) == (name in POOLS_BY_ATTENTION)
    assert (out.self_attentions is not None) == (name in HAS_SELF_ATTENTION)


@pytest.mark.parametrize("extra", [1, 13])
@pytest.mark.parametrize("name", ALL)
def test_appending_padding_keeps_logits(name, extra):
    model = tiny(name)
    ids, mask = batch()
    with torch.no_grad():
        short = model(ids, mask)
        long = model(*pad_right(ids, mask, extra))
    torch.testing.assert_close(long.logits, short.logits, atol=1e-5, rtol=1e-5)
    if short.pooling_weights is not None:
        torch.testing.assert_close(long.pooling_weights[:, : ids.size(1)], short.pooling_weights, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", ALL)
def test_padding_embeddings_get_exactly_zero_gradient(name):
    model = tiny(name)
    ids, mask = batch()
    embeddings = model.embed_tokens(ids).detach().requires_grad_()
    model(ids, mask, token_embeddings=embeddings).logits.sum().backward()
    assert embeddings.grad[~mask].abs().max() == 0
    assert embeddings.grad[mask].abs().sum() > 0


@pytest.mark.parametrize("name", ALL)
def test_padding_embedding_row_is_zero(name):
    assert tiny(name).token_embedding.weight[0].abs().sum() == 0


@pytest.mark.parametrize("name", ALL)
def test_token_embeddings_override_equals_normal_path(name):
    model = tiny(name)
    ids, mask = batch()
    with torch.no_grad():
        normal = model(ids, mask).logits
        overridden = model(ids, mask, token_embeddings=model.embed_tokens(ids)).logits
    torch.testing.assert_close(overridden, normal)


@pytest.mark.parametrize("name", ALL)
def test_mask_defaults_to_non_pad_ids(name):
    model = tiny(name)
    ids, mask = batch()
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, model(ids, mask).logits)


@pytest.mark.parametrize("name", ALL)
def test_all_padding_text_gives_finite_outputs(name):
    model = tiny(name)
    ids, mask = batch(lengths=(5, 0))
    out = model(ids, mask, output_attentions=True)
    assert torch.isfinite(out.logits).all()
    if out.pooling_weights is not None:
        assert out.pooling_weights[1].abs().sum() == 0
    for weights in out.self_attentions or []:
        assert torch.isfinite(weights).all() and weights[1].abs().sum() == 0


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_model_and_logits(name):
    ids, mask = batch()
    outputs = []
    for _ in range(2):
        torch.manual_seed(1234)
        with torch.no_grad():
            outputs.append(tiny(name)(ids, mask).logits)
    torch.testing.assert_close(outputs[0], outputs[1], atol=0, rtol=0)


@pytest.mark.parametrize("name", ALL)
def test_sizing_a_model_first_draws_nothing_from_the_seeded_stream(name):
    # build_model outlines a model (memory.outlining) before it builds it: a seed must give the weights of the model
    # built alone, those of runs trained before the outline was made to skip torch.nn.init's fills.
    config = tiny(name).config  # (learned positions and sinusoidal ones among them: transformer-mean's)
    torch.manual_seed(1234)
    built = build_model(name, **config.to_dict()).state_dict()
    torch.manual_seed(1234)
    alone = MODELS[name].model_class(config).state_dict()
    assert built.keys() == alone.keys() and all(torch.equal(built[key], alone[key]) for key in built)


@pytest.mark.parametrize("dim", [8, 64])  # (torch draws 16 normals or more in vectorised blocks)
def test_the_pooling_query_is_drawn_to_the_bit_as_earlier_versions_drew_it(dim):
    torch.manual_seed(0)
    query = AttentionPooling(dim).query.detach()
    torch.manual_seed(0)
    assert torch.equal(query, 0.02 * torch.randn(dim))


@pytest.mark.parametrize("name", ALL)
def test_model_from_config_rebuilds_the_same_model(name):
    model = tiny(name)
    rebuilt = model_from_config(name, model.config.to_dict())
    assert rebuilt.config == model.config
    rebuilt.load_state_dict(model.state_dict())
    ids, mask = batch()
    with torch.no_grad():
        torch.testing.assert_close(rebuilt.eval()(ids, mask).logits, model(ids, mask).logits)


def test_rebuilding_a_saved_model_leaves_the_callers_random_stream_alone():
    # Its weights are loaded over the initial ones: drawing them moved a notebook's torch.manual_seed stream on
    # for every Classifier.load.
    config = tiny("self-attn").config.to_dict()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    model_from_config("self-attn", config)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("name", ALL)
def test_defaults_build_with_a_real_vocabulary(name):
    model = build_model(name, vocab_size=20000)
    assert 2_000_000 < model.num_parameters() < 4_000_000  # the 20000 x 128 embedding dominates


# ---------------------------------------------------------------- recurrent models


@pytest.mark.parametrize("name", ["boe", "lstm-mean", "bilstm-attn"])
def test_position_free_models_accept_padding_anywhere(name):
    model = tiny(name)
    ids, mask = batch(lengths=(6, 2, 4), seq=6)
    left_ids = torch.stack([torch.cat([row[~m], row[m]]) for row, m in zip(ids, mask)])
    left_mask = left_ids != 0
    with torch.no_grad():
        right, left = model(ids, mask), model(left_ids, left_mask)
    torch.testing.assert_close(left.logits, right.logits, atol=1e-5, rtol=1e-5)
    if right.pooling_weights is not None:
        torch.testing.assert_close(left.pooling_weights[left_mask], right.pooling_weights[mask])


# ---------------------------------------------------------------- attention pooling


@pytest.mark.parametrize("name", POOLS_BY_ATTENTION)
def test_pooling_weights_zero_at_padding_and_sum_to_one(name):
    ids, mask = batch()
    weights = tiny(name)(ids, mask).pooling_weights
    assert weights[~mask].abs().max() == 0
    assert (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(3))


@pytest.mark.parametrize("name", POOLS_BY_ATTENTION)
def test_pooling_override_is_used_and_returned(name):
    model = tiny(name)
    ids, mask = batch()
    first_token = torch.zeros(ids.shape).index_fill(1, torch.tensor([0]), 1.0)
    with torch.no_grad():
        out = model(ids, mask, pooling_override=first_token)
        learned = model(ids, mask)
    assert torch.equal(out.pooling_weights, first_token)
    assert not torch.allclose(out.logits, learned.logits)


def test_uniform_pooling_override_equals_mean_pooling():
    attention = tiny("self-attn")
    mean = tiny("self-attn", pooling="mean")
    missing, unexpected = mean.load_state_dict(attention.state_dict(), strict=False)
    assert not missing and all(key.startswith("pool.") for key in unexpected)
    ids, mask = batch()
    uniform = mask / mask.sum(-1, keepdim=True)
    with torch.no_grad():
        torch.testing.assert_close(
            attention(ids, mask, pooling_override=uniform).logits, mean(ids, mask).logits, atol=1e-6, rtol=1e-5
        )


@pytest.mark.parametrize("score", SCORES)
def test_every_score_gives_valid_weights(score):
    torch.manual_seed(0)
    pool = AttentionPooling(8, score, max_len=16)
    x = torch.randn(3, 6, 8)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]]).bool()
    pooled, weights = pool(x, mask)
    assert weights[~mask].abs().max() == 0 and (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(3))
    torch.testing.assert_close(pooled, torch.einsum("bt,btd->bd", weights, x))
    pooled.sum().backward()
    assert all(p.grad is not None for p in pool.parameters())


@pytest.mark.parametrize("score", SCORES)
def test_self_attn_with_every_score_ignores_padding(score):
    model = tiny("self-attn", pooling_score=score)
    ids, mask = batch()
    with torch.no_grad():
        torch.testing.assert_close(model(*pad_right(ids, mask, 5)).logits, model(ids, mask).logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("score", ["general", "additive", "location"])
def test_pooling_with_a_per_example_query(score):
    pool = AttentionPooling(8, score, query_dim=4, max_len=16)
    assert pool.query is None
    _, weights = pool(torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool), query=torch.randn(2, 4))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2))


def test_location_score_ignores_content():
    pool = AttentionPooling(8, "location", max_len=16)
    mask = torch.ones(2, 5, dtype=torch.bool)
    _, weights = pool(torch.randn(2, 5, 8), mask)
    torch.testing.assert_close(weights[0], weights[1])


@pytest.mark.parametrize("pooling", ["mean", "first", "max"])
def test_parameter_free_pooling_ignores_padding(pooling):
    model = tiny("self-attn", pooling=pooling)
    ids, mask = batch()
    with torch.no_grad():
        out = model(ids, mask)
        torch.testing.assert_close(model(*pad_right(ids, mask, 4)).logits, out.logits, atol=1e-5, rtol=1e-5)
    assert out.pooling_weights is None


def test_masked_pool_first_and_max_with_left_padding():
    x = torch.tensor([[[9.0], [1.0], [5.0]]])
    mask = torch.tensor([[False, True, True]])
    assert masked_pool(x, mask, "first").item() == 1.0
    assert masked_pool(x, mask, "max").item() == 5.0
    assert masked_pool(x, mask, "mean").item() == 3.0


def test_masked_softmax_and_mean_on_empty_rows():
    mask = torch.tensor([[True, False], [False, False]])
    assert masked_softmax(torch.randn(2, 2), mask).tolist()[1] == [0.0, 0.0]
    assert masked_mean(torch.ones(2, 2, 3), mask).tolist() == [[1.0] * 3, [0.0] * 3]
    for how in ("max", "first"):  # (first took the padding position's vector; max, finfo.min)
        assert masked_pool(torch.ones(2, 2, 3), mask, how).tolist() == [[1.0] * 3, [0.0] * 3], how


# ---------------------------------------------------------------- self-attention


@pytest.mark.parametrize("name", HAS_SELF_ATTENTION)
def test_self_attention_maps(name):
    model = tiny(name)
    ids, mask = batch()
    maps = model(ids, mask, output_attentions=True).self_attentions
    assert len(maps) == getattr(model.config, "layers", 1)
    for weights in maps:
        assert weights.shape == (3, 2, 7, 7)
        assert weights.masked_select(~mask[:, None, None, :]).abs().max() == 0  # padding keys
        assert weights.masked_select(~mask[:, None, :, None]).abs().max() == 0  # padding queries
        real_rows = weights.sum(-1).masked_select(mask[:, None, :])
        torch.testing.assert_close(real_rows, torch.ones_like(real_rows))


@pytest.mark.parametrize("name", HAS_SELF_ATTENTION)
def test_fast_path_equals_explicit_path(name):
    model = tiny(name)
    ids, mask = batch()
    with torch.no_grad():
        fast = model(ids, mask)
        explicit = model(ids, mask, output_attentions=True)
    torch.testing.assert_close(explicit.logits, fast.logits, atol=1e-5, rtol=1e-5)


def test_multi_head_self_attention_matches_torch():
    torch.manual_seed(0)
    ours = MultiHeadSelfAttention(16, heads=4).eval()
    reference = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with torch.no_grad():
        reference.in_proj_weight.copy_(ours.qkv.weight)
        reference.in_proj_bias.copy_(ours.qkv.bias)
        reference.out_proj.weight.copy_(ours.proj.weight)
        reference.out_proj.bias.copy_(ours.proj.bias)
    x = torch.randn(2, 5, 16)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    expected, expected_weights = reference(x, x, x, key_padding_mask=~mask, average_attn_weights=False)
    for need_weights in (False, True):
        y, weights = ours(x, mask, need_weights=need_weights)
        torch.testing.assert_close(y[mask], expected[mask], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(weights.transpose(1, 2)[mask], expected_weights.transpose(1, 2)[mask])


def test_block_local_attention_stays_inside_its_blocks():
    torch.manual_seed(0)
    attention = MultiHeadSelfAttention(16, heads=4, window=4).eval()
    x = torch.randn(3, 10, 16)  # blocks 0-3, 4-7 and 8-9 (+ 2 padding)
    mask = torch.arange(10) < torch.tensor([10, 7, 3])[:, None]  # row 2: its last two blocks are padding alone
    with torch.no_grad():
        fast, _ = attention(x, mask)
        explicit, weights = attention(x, mask, need_weights=True)
        changed = x.clone()
        changed[:, 4:8] = torch.randn(3, 4, 16)
        after, _ = attention(changed, mask)
    torch.testing.assert_close(fast[mask], explicit[mask], atol=1e-6, rtol=1e-5)
    block = torch.arange(10) // 4
    across_blocks = block[:, None] != block[None, :]
    assert weights[:, :, across_blocks].abs().max() == 0
    real_rows = weights.sum(-1).masked_select(mask[:, None, :])
    torch.testing.assert_close(real_rows, torch.ones_like(real_rows))
    outside = (block != 1)[None, :] & mask
    torch.testing.assert_close(after[outside], fast[outside])  # another block's tokens are never seen
    assert not torch.allclose(after[:, 4:7][mask[:, 4:7]], fast[:, 4:7][mask[:, 4:7]])
    assert torch.isfinite(fast).all()


def test_a_block_of_padding_alone_stays_finite_where_attention_without_keys_answers_nan(monkeypatch):
    # torch before 2.5, and CUDA's fused kernels, answer NaN for a query with no key to see; today's CPU kernel
    # answers zeros, which would hide a block-local mask that leaves a padding-only block without keys.
    def without_keys_nan(q, k, v, attn_mask=None, dropout_p=0.0):
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        return torch.softmax(scores.masked_fill(~attn_mask, float("-inf")), dim=-1) @ v

    monkeypatch.setattr(attention_module.F, "scaled_dot_product_attention", without_keys_nan)
    torch.manual_seed(0)
    attention = MultiHeadSelfAttention(16, heads=4, window=4).eval()
    mask = torch.arange(10) < torch.tensor([10, 3])[:, None]  # row 1: its last two blocks are padding alone
    with torch.no_grad():
        out, _ = attention(torch.randn(2, 10, 16), mask)
    assert torch.isfinite(out).all()


def test_block_local_attention_trains_as_its_explicit_masked_form():
    # The fast path pads to whole blocks and cuts after the projection; the explicit path masks across blocks
    # at full length. Gradients of the input and the weights must agree for the real tokens.
    torch.manual_seed(0)
    attention = MultiHeadSelfAttention(16, heads=4, window=4).train()
    x = torch.randn(2, 10, 16)
    mask = torch.arange(10) < torch.tensor([10, 6])[:, None]
    grads = []
    for need_weights in (False, True):
        inputs = x.clone().requires_grad_()
        attention.zero_grad()
        y, _ = attention(inputs, mask, need_weights=need_weights)
        y[mask].square().sum().backward()
        grads.append([inputs.grad] + [param.grad.clone() for param in attention.parameters()])
    for fast, explicit in zip(*grads, strict=True):
        torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-4)


def test_a_window_longer_than_the_text_is_full_attention():
    windowed = tiny("self-attn", attention_window=8)
    full = tiny("self-attn")
    full.load_state_dict(windowed.state_dict())
    ids, mask = batch()  # 7 tokens at most
    with torch.no_grad():
        torch.testing.assert_close(windowed(ids, mask).logits, full(ids, mask).logits)
        longer, longer_mask = batch(lengths=(20, 9, 3))
        assert not torch.allclose(windowed(longer, longer_mask).logits, full(longer, longer_mask).logits)


@pytest.mark.parametrize("extra", [1, 6, 13])
def test_windowed_self_attn_ignores_padding_and_matches_its_maps(extra):
    model = tiny("self-attn", attention_window=3, nb_ngram_buckets=31)
    ids, mask = batch(lengths=(7, 1, 4))
    with torch.no_grad():
        logits = model(ids, mask).logits
        torch.testing.assert_close(model(*pad_right(ids, mask, extra)).logits, logits)
        explicit = model(ids, mask, output_attentions=True)
    torch.testing.assert_close(explicit.logits, logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name, options", [("self-attn", {"attention_window": 4, "nb_ngram_buckets": 31}),
                                           ("self-attn", {}), ("transformer-mean", {"norm_first": False})])
def test_inference_in_chunks_matches_whole_batches(monkeypatch, name, options):
    # Chunks of 8 tokens split the batch's blocks and feed-forward rows mid-text, and 19 tokens pad to whole
    # windows; a chunk that misaligned rows, masks or blocks would change the logits.
    model = tiny(name, **options)
    ids, mask = batch(lengths=(19, 9, 3))
    monkeypatch.setattr(attention_module, "INFERENCE_CHUNK_TOKENS", 8)
    calls = []
    for module in model.modules():
        if isinstance(module, (EncoderBlock, MultiHeadSelfAttention)):
            (module.ff if isinstance(module, EncoderBlock) else module.qkv).register_forward_hook(
                lambda module, inputs, output: calls.append(type(module).__name__))
    whole = model(ids, mask).logits.detach()  # gradients recorded: whole batches, as training needs
    assert calls.count("Sequential") == len(model.encoder.blocks)
    calls.clear()
    with torch.inference_mode():
        chunked = model(ids, mask).logits
    torch.testing.assert_close(chunked, whole, atol=1e-6, rtol=1e-5)
    assert calls.count("Sequential") > len(model.encoder.blocks)  # the feed-forward ran in chunks
    if options.get("attention_window"):
        assert calls.count("Linear") > len(model.encoder.blocks)  # and so did the blocks


def test_heads_must_divide_the_model_dimension():
    with pytest.raises(AttnclfError, match="heads=3"):
        build_model("self-attn", d_model=16, heads=3)


HUGE = 10 ** 15  # positions: 512 PB of learned position table at d_model 128, beyond any machine and address space


@pytest.mark.parametrize("name, options", [("self-attn", {"positional": "learned"}),
                                           ("self-attn", {"positional": "sinusoidal"}),
                                           ("bilstm-attn", {"pooling_score": "location"})])  # a score per position
def test_a_max_len_whose_tables_cannot_fit_in_memory_is_refused_before_allocating(name, options):
    # It was torch's allocator failing mid-construction: "DefaultCPUAllocator: can't allocate memory: you tried to
    # allocate 51200000000 bytes" for --max-len 100000000, a RuntimeError with no word of max_len.
    with pytest.raises(AttnclfError, match=rf"^model '{name}' with max_len {HUGE:,} needs at least [\d,.]+ GB for its "
                                           r"weights, more than this machine's [\d,.]+ GB; lower max_len \(--max-len\)$"):
        build_model(name, vocab_size=VOCAB, max_len=HUGE, **options)


def test_an_allocation_that_fails_anyway_names_max_len_too(monkeypatch):
    from attnclf.models import memory

    monkeypatch.setattr(memory, "machine_memory", lambda: 10 ** 21)  # it claims the memory (a ulimit says otherwise)
    with pytest.raises(AttnclfError, match=rf"^model 'self-attn' with max_len {HUGE:,} needs at least 512,000,000\.\d "
                                           r"GB for its weights, and not that much is free; lower max_len"):
        build_model("self-attn", vocab_size=VOCAB, max_len=HUGE, positional="learned", d_model=128, heads=2)


def _cgroups(monkeypatch, tmp_path, membership: str, limits: dict[str, str]) -> None:
    """A pretend /proc/self/cgroup (``membership``) and /sys/fs/cgroup (``limits``: file -> content)."""
    from attnclf.models import memory

    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cgroup").write_text(membership)
    for name, content in limits.items():
        (tmp_path / "sys" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "sys" / name).write_text(content + "\n")
    monkeypatch.setattr(memory, "PROC_CGROUP", tmp_path / "cgroup")
    monkeypatch.setattr(memory, "CGROUP_ROOT", tmp_path / "sys")


def test_a_containers_memory_limit_is_the_bound_not_the_hosts_memory(monkeypatch, tmp_path):
    from attnclf.models.memory import machine_memory

    # A container limited to 1 GB on this host: a 5 GB position table was built (or trained on) until the kernel's
    # OOM killer ended the process without a word. cgroup v2, the container's own cgroup mounted as the root:
    _cgroups(monkeypatch, tmp_path, "0::/\n", {"memory.max": "1000000000"})
    assert machine_memory() == 10 ** 9
    with pytest.raises(AttnclfError, match=r"needs at least 5\.1 GB for its weights, more than this machine's 1\.0 GB; "
                                           r"lower max_len \(--max-len\)$"):
        build_model("self-attn", vocab_size=VOCAB, max_len=10 ** 7, positional="learned", d_model=128, heads=2)


def test_cgroup_limits_bind_from_every_level_and_none_is_no_bound(monkeypatch, tmp_path):
    from attnclf.models.memory import machine_memory

    physical = machine_memory()
    _cgroups(monkeypatch, tmp_path / "v2", "0::/\n", {"memory.max": "max"})  # unlimited
    assert machine_memory() == physical
    # cgroup v1 seen from the host: the process's cgroup and a parent, the lower binds; a v1 "unlimited" is 2**63.
    _cgroups(monkeypatch, tmp_path / "v1", "5:cpu:/x\n4:memory:/docker/abc\n",
             {"memory/memory.limit_in_bytes": "9223372036854771712",
              "memory/docker/memory.limit_in_bytes": "2000000000",
              "memory/docker/abc/memory.limit_in_bytes": "3000000000"})
    assert machine_memory() == 2 * 10 ** 9
    # ...and from inside the container, whose /proc/self/cgroup names a host path not mounted there.
    _cgroups(monkeypatch, tmp_path / "inside", "4:memory:/docker/abc\n", {"memory/memory.limit_in_bytes": "3000000000"})
    assert machine_memory() == 3 * 10 ** 9
    _cgroups(monkeypatch, tmp_path / "none", "", {})  # (no cgroups: macOS has no /proc, Windows neither)
    assert machine_memory() == physical


def test_the_physical_memory_is_read_by_the_names_macos_knows_too(monkeypatch):
    import os

    from attnclf.models.memory import machine_memory

    # macOS's Python (conda's among them) has SC_PAGESIZE, POSIX's name, and no SC_PAGE_SIZE: asked for that, the
    # check found no memory and refused nothing there.
    sysconf = os.sysconf

    def macos_sysconf(name):
        if name == "SC_PAGE_SIZE":
            raise ValueError("unrecognized configuration name")
        return sysconf(name)

    monkeypatch.setattr(os, "sysconf", macos_sysconf)
    monkeypatch.setattr("attnclf.models.memory.cgroup_memory_limit", lambda: None)
    assert machine_memory() == sysconf("SC_PAGESIZE") * sysconf("SC_PHYS_PAGES")


def test_long_documents_and_a_position_free_huge_max_len_still_build():
    # Users read 800-4096 tokens; a max_len with no table behind it (no positions, no location score) costs nothing.
    assert build_model("self-attn", vocab_size=VOCAB, max_len=4096, d_model=16, heads=2).config.max_len == 4096
    assert build_model("self-attn", vocab_size=VOCAB, max_len=HUGE, positional="none", d_model=16,
                       heads=2).num_parameters() < 10 ** 6


def test_transformer_mean_pre_norm_switch():
    ids, mask = batch()
    for norm_first in (False, True):
        model = tiny("transformer-mean", norm_first=norm_first, positional="none", activation="gelu")
        with torch.no_grad():
            torch.testing.assert_close(model(*pad_right(ids, mask, 3)).logits, model(ids, mask).logits)


def test_self_attn_under_bfloat16_autocast():
    model = tiny("self-attn")
    ids, mask = batch()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(ids, mask)
    assert torch.isfinite(out.logits).all()
    assert out.pooling_weights[~mask].abs().max() == 0
    assert out.pooling_weights.dtype == torch.float32  # explanations read these: keep them precise
    torch.testing.assert_close(out.pooling_weights.sum(-1), torch.ones(3))


def test_self_attn_overfits_eight_examples():
    torch.manual_seed(0)
    model = build_model("self-attn", vocab_size=VOCAB, max_len=16, d_model=32, heads=2, layers=1, ff_dim=64).train()
    ids, mask = batch(lengths=(8, 5, 3, 8, 6, 2, 7, 4), seed=3)
    labels = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(40):
        loss = torch.nn.functional.cross_entropy(model(ids, mask).logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        logits = model.eval()(ids, mask).logits
    assert (logits.argmax(-1) == labels).all()
    assert torch.nn.functional.cross_entropy(logits, labels) < 0.05  # memorised, not just on the right side


# ---------------------------------------------------------------- positions


def test_positional_encodings():
    x = torch.zeros(2, 3, 6)
    sinusoidal = positional_encoding("sinusoidal", 8, 6)(x)
    assert sinusoidal[0, 0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    torch.testing.assert_close(sinusoidal[0, 2, :2], torch.tensor([math.sin(2), math.cos(2)]))
    assert positional_encoding("learned", 8, 6)(x).shape == x.shape
    assert positional_encoding("none", 8, 6)(x) is x
    assert positional_encoding("sinusoidal", 8, 5)(torch.zeros(1, 3, 5)).shape == (1, 3, 5)  # odd dim


def test_positional_encoding_errors():
    with pytest.raises(AttnclfError, match="sinusoidal, learned, none"):
        positional_encoding("rotary", 8, 6)
    with pytest.raises(AttnclfError, match="sequence length 9 exceeds"):
        positional_encoding("learned", 8, 6)(torch.zeros(1, 9, 6))


def test_sinusoidal_table_stays_out_of_checkpoints():
    assert not any("table" in key for key in build_model("transformer-mean", vocab_size=VOCAB).state_dict())


# ---------------------------------------------------------------- registry


def test_registry_specs():
    for name, spec in MODELS.items():
        assert spec.name == name and spec.description
        assert spec.model_class.__doc__.startswith(f"``{name}``") and "seed 00" in spec.model_class.__doc__.lower()
        spec.config_class()  # every field has a working default


def test_unknown_model_lists_the_names():
    with pytest.raises(AttnclfError, match="unknown model 'bert'.*boe, pos-mean"):
        build_model("bert")


def test_unknown_field_is_named_with_the_valid_ones():
    with pytest.raises(AttnclfError, match="'boe' has no config field 'heads'; valid fields: vocab_size.*embed_dim"):
        build_model("boe", heads=2)


@pytest.mark.parametrize(
    ("name", "field", "value", "message"),
    [
        ("self-attn", "pooling", "cls", "unknown pooling 'cls'"),
        ("self-attn", "pooling_score", "bilinear", "unknown attention score 'bilinear'"),
        ("bilstm-attn", "pooling_score", "nope", "unknown attention score 'nope'"),
        ("transformer-mean", "positional", "rotary", "unknown positional encoding 'rotary'"),
        ("transformer-mean", "activation", "tanh", "unknown activation 'tanh'"),
        ("self-attn", "attention_window", -1, "model field attention_window must be at least 0, got -1"),
        ("self-attn", "d_model", "wide", "model field d_model takes int values like 128, got .wide."),
        ("boe", "dropout", 1.0, "model field dropout must be below 1, got 1.0"),
        ("lstm-mean", "layers", 0, "model field layers must be at least 1, got 0"),
        ("bilstm-attn", "layers", 0, "model field layers must be at least 1, got 0"),
    ],
)
def test_bad_config_values(name, field, value, message):
    with pytest.raises(AttnclfError, match=message):
        build_model(name, **{field: value})


def test_config_values_parsed_from_text_take_their_field_type():
    from attnclf.models import config_for

    config = config_for("self-attn", dropout=0, embedding_norm=1, layers=0)  # --set dropout=0 parses as an int
    assert (config.dropout, config.embedding_norm, config.layers) == (0.0, True, 0)
    assert type(config.dropout) is float and type(config.embedding_norm) is bool


@pytest.mark.parametrize("memory, max_len, shortfall", [
    (10 ** 6, 10 ** 5, r"more than this machine's 0\.0 GB"),  # more than the machine has
    (10 ** 21, HUGE, "and not that much is free"),  # the machine has it, but its allocator says no
])
def test_a_saved_run_too_large_for_this_machine_is_not_told_to_lower_what_its_training_fixed(monkeypatch, memory,
                                                                                             max_len, shortfall):
    # "lower max_len (--max-len)" is no remedy for a run being loaded (predict, evaluate, serve): its training fixed it.
    from attnclf.models import memory as memory_module

    with torch.device("meta"):
        config = build_model("self-attn", vocab_size=VOCAB, max_len=max_len, positional="learned").config.to_dict()
    monkeypatch.setattr(memory_module, "machine_memory", lambda: memory)
    with pytest.raises(AttnclfError, match=rf"^runs/big: model 'self-attn' with max_len {max_len:,} needs at least "
                                           rf"[\d,.]+ GB for its weights, {shortfall}; its training fixed that size: "
                                           r"load it where more memory is free, or train it again and lower max_len "
                                           r"\(--max-len\)$"):
        model_from_config("self-attn", config, saved_in="runs/big")


def test_parameter_table_counts_each_model_at_the_given_vocabulary_with_the_overrides_it_takes():
    from attnclf.models import MODELS, build_model, parameter_table

    lines = parameter_table(vocab_size=1000, num_classes=3, overrides={"d_model": 32}).splitlines()
    assert lines[0].split() == ["name", "parameters", "description"]
    rows = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert list(rows) == list(MODELS)
    # boe has no d_model: the override reaches only the models whose config has that field
    assert rows["boe"] == f"{build_model('boe', vocab_size=1000, num_classes=3).num_parameters():,}"
    self_attn = build_model("self-attn", vocab_size=1000, num_classes=3, d_model=32)
    assert rows["self-attn"] == f"{self_attn.num_parameters():,}"


def test_the_parameter_tables_heading_names_the_vocabulary_classes_and_overrides_it_counts_at():
    # The line `attnclf models` heads its table with is the library's, as the table is.
    from attnclf.models import parameter_table_heading

    assert parameter_table_heading(20000, 2) == ("parameters at a 20,000-word vocabulary, 2 classes and each model's "
                                                 "default config (a run's count follows its vocabulary and recipe)")
    assert "each model's default config with --set (a run's" in \
        parameter_table_heading(1000, 3, {"d_model": 32}, overrides_named="--set")
