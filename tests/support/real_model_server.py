"""Runs llama-cpp-python's OpenAI-compatible server, optionally with grammar checking done the way
llama.cpp's own C++ server does it. Executed by the real-model virtualenv's Python (it imports
nothing from the project):

    $VENV/bin/python tests/support/real_model_server.py [--grammar-check first|full] <llama_cpp.server args>

`--grammar-check full` (llama-cpp-python's behaviour) puts the grammar in the sampler chain: every
generated token runs the grammar over the whole vocabulary (262,144 entries for Gemma 3), about a
second per token on a busy 2-core machine. `--grammar-check first` (the default here) samples from
the unconstrained distribution first and asks the grammar about that one token; only when the
grammar rejects it is the whole vocabulary filtered and the token sampled again. This is what
llama.cpp's `common_sampler_sample` does in `llama-server`. For greedy decoding the result is the
same token; with temperature it is a draw from the same constrained distribution whenever the first
draw is allowed. Either way every token the server emits is one the grammar accepts.
"""
from __future__ import annotations

import ctypes
import math
import os
import sys
import time

import numpy as np


STATS = os.environ.get("AIOPS_REAL_MODEL_SAMPLER_STATS") == "1"


def _patch_grammar_first() -> None:
    import llama_cpp
    from llama_cpp import llama as llama_module

    original_init_sampler = llama_module.Llama._init_sampler

    class GrammarFirstSampler:
        """A sampler chain without the grammar, plus the grammar as a separate checker."""

        def __init__(self, chain, model, grammar, n_vocab: int) -> None:
            self.chain = chain  # llama_cpp._internals.LlamaSampler (penalties ... greedy/dist)
            self.grammar = llama_cpp.llama_sampler_init_grammar(
                model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
            if not self.grammar:
                raise ValueError("the grammar did not compile")
            self.n_vocab = n_vocab
            self.data = (llama_cpp.llama_token_data * n_vocab)()
            self.view = np.ctypeslib.as_array(self.data)
            self.ids = np.arange(n_vocab, dtype=np.int32)
            self.one = (llama_cpp.llama_token_data * 1)()
            self.stats = {"tokens": 0, "rejected": 0, "seconds": 0.0}

        def _candidates(self, ctx, idx: int):
            logits = llama_cpp.llama_get_logits_ith(ctx.ctx, idx)
            self.view["id"] = self.ids
            self.view["logit"] = np.ctypeslib.as_array(logits, shape=(self.n_vocab,))
            self.view["p"] = 0.0
            return llama_cpp.llama_token_data_array(
                data=ctypes.cast(self.data, ctypes.POINTER(llama_cpp.llama_token_data)),
                size=self.n_vocab, selected=-1, sorted=False)

        def _allowed(self, token: int) -> bool:
            self.one[0].id, self.one[0].logit, self.one[0].p = token, 0.0, 0.0
            single = llama_cpp.llama_token_data_array(
                data=ctypes.cast(self.one, ctypes.POINTER(llama_cpp.llama_token_data)), size=1,
                selected=-1, sorted=False)
            llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(single))
            return not math.isinf(self.one[0].logit)

        def sample(self, ctx, idx: int = -1) -> int:
            started = time.perf_counter()
            cur = self._candidates(ctx, idx)
            llama_cpp.llama_sampler_apply(self.chain.sampler, ctypes.byref(cur))
            token = int(cur.data[cur.selected].id)
            self.stats["tokens"] += 1
            if not self._allowed(token):
                self.stats["rejected"] += 1
                cur = self._candidates(ctx, idx)
                llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(cur))
                llama_cpp.llama_sampler_apply(self.chain.sampler, ctypes.byref(cur))
                token = int(cur.data[cur.selected].id)
            llama_cpp.llama_sampler_accept(self.chain.sampler, token)
            llama_cpp.llama_sampler_accept(self.grammar, token)
            self.stats["seconds"] += time.perf_counter() - started
            return token

        def accept(self, token: int) -> None:
            llama_cpp.llama_sampler_accept(self.chain.sampler, token)
            llama_cpp.llama_sampler_accept(self.grammar, token)

        def reset(self) -> None:
            llama_cpp.llama_sampler_reset(self.chain.sampler)
            llama_cpp.llama_sampler_reset(self.grammar)

        def close(self) -> None:
            if STATS and self.stats["tokens"]:
                print(f"grammar-first sampler: {self.stats}", file=sys.stderr, flush=True)
            if self.grammar:
                llama_cpp.llama_sampler_free(self.grammar)
                self.grammar = None
            self.chain.close()

        def __del__(self) -> None:
            self.close()

    def _init_sampler(self, *args, grammar=None, **kwargs):
        chain = original_init_sampler(self, *args, grammar=None, **kwargs)
        if grammar is None:
            return chain
        return GrammarFirstSampler(chain, self._model, grammar, self._n_vocab)

    llama_module.Llama._init_sampler = _init_sampler


def main(argv: list[str]) -> None:
    mode = "first"
    if argv[:1] == ["--grammar-check"]:
        mode, argv = argv[1], argv[2:]
    if mode not in ("first", "full"):
        raise SystemExit(f"--grammar-check must be 'first' or 'full', got {mode!r}")
    if mode == "first":
        _patch_grammar_first()
    from llama_cpp.server.__main__ import main as server_main

    sys.argv = ["llama_cpp.server", *argv]
    server_main()


if __name__ == "__main__":
    main(sys.argv[1:])
