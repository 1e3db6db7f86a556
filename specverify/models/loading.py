"""Loading a draft/target pair of real causal LMs, and a tiny random pair for tests.

A pair comes from a Hugging Face hub id, a local folder, or a local GGUF file (transformers
dequantizes GGUF on load: ``from_pretrained(folder, gguf_file=name)``, which needs the ``gguf``
and ``accelerate`` packages). The handout's pair is Qwen2.5-1.5B-Instruct (target) drafted by
Qwen2.5-0.5B-Instruct (Qwen2.5 report, arXiv 2412.15115); both share one tokenizer, but their
configs may pad the vocabulary differently, so only the first ``len(tokenizer)`` logits are ever
compared (``ModelPair.vocab_size``).

Precision: fp32 on CPU, bf16 on a GPU, fp16 on a GPU without bf16 (a T4).

Offline: nothing here sets ``HF_HUB_OFFLINE`` or any other global. Every load tries the local
folder or the local cache first (``local_files_only=True``: a cached model loads with no
network); only then, unless HF_HUB_OFFLINE is set, is the hub's host (HF_ENDPOINT) probed with a
TCP connection of at most ``PROBE_TIMEOUT_S`` seconds before transformers may download. A hub id
that is neither a local folder nor cached fails with a ``LoadError`` (a RuntimeError) naming the
argument and the model id, saying it is offline, the host cannot be reached, or the id was not
found, instead of a minute of retries and a connection traceback.

``tiny_pair`` builds a random Qwen2-architecture pair (a few layers, hidden 64) whose draft is the
target's first layers plus small weight noise, so that alpha sits well inside (0, 1), with a
byte-level ``ByteTokenizer`` so that prompts work end to end with nothing downloaded.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_TARGET = "Qwen/Qwen2.5-1.5B-Instruct"
DEFAULT_DRAFT = "Qwen/Qwen2.5-0.5B-Instruct"
ENV_DIR = "SPECVERIFY_REAL_DIR"
ENV_DRAFT_GGUF = "SPECVERIFY_REAL_DRAFT_GGUF"
ENV_TARGET_GGUF = "SPECVERIFY_REAL_TARGET_GGUF"
PROBE_TEXT = "def mean(xs: list[float]) -> float:\n    return sum(xs) / len(xs)  # héllo, 世界!"


@dataclass
class ModelPair:
    """A target, its draft, their shared tokenizer and the number of logits to compare."""

    target: object
    draft: object
    tokenizer: object
    vocab_size: int
    device: str
    dtype: object
    name: str

    @property
    def eos_token_id(self):
        return getattr(self.tokenizer, "eos_token_id", None)


class ByteTokenizer:
    """A byte-level tokenizer stand-in: token i < 256 is byte i, tokens 256.. are specials.

    Enough of a tokenizer (``encode``, ``decode``, ``len``, ``eos_token_id``) for the decoding loop
    and the measurement to run on a tiny random model without downloading anything.
    """

    n_bytes = 256

    def __init__(self, n_special: int = 44):
        if n_special < 1:
            raise ValueError(f"n_special: must be >= 1 (one is the end-of-text token), got {n_special}")
        self.n_special = int(n_special)
        self.eos_token_id = None  # random models never stop; generation runs to max_new_tokens
        self.chat_template = None

    def __len__(self) -> int:
        return self.n_bytes + self.n_special

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        data = bytes(i for i in ids if i < self.n_bytes)
        return data.decode("utf-8", errors="replace")


def prompt_ids(tokenizer, text: str) -> list[int]:
    """Token ids of a user turn, through the chat template when the tokenizer has one."""
    if getattr(tokenizer, "chat_template", None):
        out = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
        )
        out = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
        return [int(i) for i in out]
    return [int(i) for i in tokenizer.encode(text)]


def torch_modules():
    """Import torch and transformers, or raise an ImportError that says how to install them."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise ImportError(
            f"the real-model stage needs torch and transformers ({exc}); install them with: pip install -e '.[models]'"
        ) from None
    return torch, transformers


def pick_device_and_dtype(device: str | None = None):
    """(device, dtype): fp32 on CPU; bf16 on CUDA, or fp16 where the GPU lacks bf16 (a T4)."""
    torch, _ = torch_modules()
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"device: expected 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if device == "cpu":
        return device, torch.float32
    if not torch.cuda.is_available():
        raise ValueError(f"device: {device!r} requested but CUDA is not available")
    return device, torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def _dtype_kwarg() -> str:
    """transformers >= 4.56 takes ``dtype=``; older versions only ``torch_dtype=``."""
    _, transformers = torch_modules()
    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _split_gguf(source: str | None, gguf_file: str | None, role: str = "model") -> tuple[str, str | None]:
    """A GGUF path may be given whole, or as a file name inside the folder ``source``."""
    argument = _argument_of(role)
    if gguf_file is None:
        if source is None:
            raise ValueError(f"{argument}: a hub id or a local folder is required when no GGUF file is given")
        return source, None
    path = Path(gguf_file) if source is None else Path(source) / gguf_file
    if not path.is_file():
        name = f"{argument}_gguf" if argument != "source" else "gguf_file"
        raise ValueError(f"{name}: {str(path)!r} is not a file")
    return str(path.parent), path.name


class LoadError(RuntimeError):
    """A model or tokenizer that could not be loaded, for a reason outside this code (not a
    local folder, not cached, hub unreachable or id unknown). ``argument`` names the parameter
    ("target", "draft" or "source"), ``detail`` says why; ``str()`` is "ARGUMENT: DETAIL"."""

    def __init__(self, argument: str, detail: str):
        super().__init__(f"{argument}: {detail}")
        self.argument, self.detail = argument, detail


PROBE_TIMEOUT_S = 3.0
"""How long the hub's host may take to accept a TCP connection before it counts as unreachable."""


def _argument_of(role: str) -> str:
    word = role.split()[0] if role else "source"
    return word if word in ("target", "draft") else "source"


def offline() -> bool:
    """Whether HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) asks that the hub not be contacted."""
    return any(
        os.environ.get(name, "").strip().lower() not in ("", "0", "false", "off", "no")
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_endpoint() -> tuple[str, str, int]:
    """(endpoint URL, host, port) of the hub: HF_ENDPOINT, else https://huggingface.co."""
    from urllib.parse import urlsplit

    url = os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co"
    parts = urlsplit(url if "://" in url else f"https://{url}")
    try:
        port = parts.port
    except ValueError:
        port = None
    return url, parts.hostname or url, port or (80 if parts.scheme == "http" else 443)


_PROBED: dict = {}


def hub_unreachable(timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the hub's host accepts a TCP connection within ``timeout`` seconds, else why not
    (one phrase, ``network.unreachable``'s, with the host and port). Remembered per endpoint for
    the process."""
    from ..common.network import unreachable

    url, host, port = hub_endpoint()
    if (host, port) not in _PROBED:
        why = unreachable(host, port, timeout)
        _PROBED[host, port] = None if why is None else f"{why} at {host}:{port}"
    return _PROBED[host, port]


def check_source(argument: str, source) -> None:
    """ValueError naming ``argument`` when ``source`` is neither an existing local path nor
    shaped like a hub id (``name`` or ``org/name``): "./models/qwen" that is not there."""
    if source is None or os.path.exists(os.path.expanduser(str(source))):
        return
    text = str(source)
    if text.startswith(("/", ".", "~")) or text.count("/") > 1 or "\\" in text or not text.strip():
        raise ValueError(f"{argument}: {text!r} is not a local folder (no such path) and not a hub id (org/name)")
    try:
        from huggingface_hub.utils import validate_repo_id
    except ImportError:
        return
    try:
        validate_repo_id(text)
    except ValueError as exc:
        raise ValueError(
            f"{argument}: {text!r} is not a local folder (no such path) and not a hub id ({str(exc).splitlines()[0]})"
        ) from None


def _cause(exc: Exception, limit: int = 300) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _explain_load_failure(role: str, source: str, gguf_file: str | None, exc: Exception):
    argument = _argument_of(role)
    where = f"{source!r}" + (f" (gguf_file={gguf_file!r})" if gguf_file else "")
    if os.path.exists(os.path.expanduser(str(source))):
        return LoadError(argument, f"could not load the {role} from the local {where}: {_cause(exc)}")
    hint = "HF_HUB_OFFLINE is set, so the hub was not asked" if offline() else "the hub is unreachable"
    return LoadError(
        argument,
        f"could not load the {role} {where}: it is not a local folder with model files and it is "
        f"not in the local Hugging Face cache, and {hint} (offline) or the id was not found. "
        f"Pass a local folder or GGUF file, or set {ENV_DIR} with {ENV_TARGET_GGUF} and "
        f"{ENV_DRAFT_GGUF}. Cause: {_cause(exc)}",
    )


def _load_failures():
    """Exception types that mean 'not found locally and not fetchable' rather than a bug here."""
    kinds = [OSError, ConnectionError, TimeoutError]
    try:
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

        kinds += [HfHubHTTPError, LocalEntryNotFoundError]
    except ImportError:  # older huggingface_hub: these derive from OSError / requests errors
        pass
    try:
        import requests

        kinds.append(requests.exceptions.RequestException)
    except ImportError:
        pass
    try:
        import httpx

        kinds.append(httpx.HTTPError)
    except ImportError:
        pass
    return tuple(kinds)


def _from_pretrained(auto, folder: str, role: str, gguf_name, **kwargs):
    """``auto.from_pretrained(folder)``, local first: a local folder or a model in the local
    cache loads without the network. Otherwise, unless offline, the hub's host is probed (a few
    seconds at most) before transformers is let to download, so an unreachable hub is one
    LoadError naming the argument rather than a minute of retries."""
    check_source(_argument_of(role), folder)
    try:
        return auto.from_pretrained(folder, local_files_only=True, **kwargs)
    except _load_failures() as exc:
        local = exc
    if offline() or os.path.exists(os.path.expanduser(folder)):
        raise _explain_load_failure(role, folder, gguf_name, local) from local
    why = hub_unreachable()
    if why is not None:
        url, host, _ = hub_endpoint()
        source = "HF_ENDPOINT" if os.environ.get("HF_ENDPOINT", "").strip() else "the default; HF_ENDPOINT sets it"
        raise LoadError(
            _argument_of(role),
            f"{folder} is not a local folder or a cached model, and {host} cannot be reached "
            f"({why}; hub {url}, {source}): pass a local folder or a GGUF file, or run "
            f"where the hub can be reached",
        ) from local
    try:
        return auto.from_pretrained(folder, **kwargs)
    except _load_failures() as exc:
        raise _explain_load_failure(role, folder, gguf_name, exc) from exc


def load_model(source=None, *, gguf_file=None, device=None, dtype=None, role="model"):
    """One causal LM from a hub id, a local folder, or a GGUF file, in eval mode on ``device``."""
    _, transformers = torch_modules()
    device, default_dtype = pick_device_and_dtype(device)
    folder, gguf_name = _split_gguf(source, gguf_file, role)
    kwargs = {_dtype_kwarg(): dtype or default_dtype}
    if gguf_name is not None:
        kwargs["gguf_file"] = gguf_name
    model = _from_pretrained(transformers.AutoModelForCausalLM, folder, role, gguf_name, **kwargs)
    return model.to(device).eval()


def load_tokenizer(source=None, *, gguf_file=None, role="tokenizer"):
    _, transformers = torch_modules()
    folder, gguf_name = _split_gguf(source, gguf_file, role)
    kwargs = {"gguf_file": gguf_name} if gguf_name is not None else {}
    return _from_pretrained(transformers.AutoTokenizer, folder, role, gguf_name, **kwargs)


def check_tokenizers_agree(target_tok, draft_tok, probe: str = PROBE_TEXT) -> None:
    """The rule compares p and q token by token, so both models must share one vocabulary."""
    if len(target_tok) != len(draft_tok):
        raise ValueError(
            f"tokenizers: target has {len(target_tok)} tokens, draft {len(draft_tok)}; "
            "speculative decoding needs one shared vocabulary"
        )
    a, b = target_tok.encode(probe), draft_tok.encode(probe)
    if list(a) != list(b):
        raise ValueError(f"tokenizers: target and draft encode the probe {probe!r} differently")


def shared_vocab_size(tokenizer, target, draft) -> int:
    """len(tokenizer), after checking both (possibly padded) logit widths cover it."""
    n = len(tokenizer)
    for role, model in (("target", target), ("draft", draft)):
        width = model.config.vocab_size
        if width < n:
            raise ValueError(f"{role}: config.vocab_size {width} is smaller than the tokenizer ({n})")
    return n


def env_pair() -> dict | None:
    """The local GGUF pair named by SPECVERIFY_REAL_DIR / _DRAFT_GGUF / _TARGET_GGUF, if all set."""
    folder = os.environ.get(ENV_DIR)
    draft_file = os.environ.get(ENV_DRAFT_GGUF)
    target_file = os.environ.get(ENV_TARGET_GGUF)
    if not (folder and draft_file and target_file):
        return None
    return {"target": folder, "draft": folder, "target_gguf": target_file, "draft_gguf": draft_file}


def load_pair(target=None, draft=None, *, target_gguf=None, draft_gguf=None, device=None, dtype=None) -> ModelPair:
    """Load target and draft (hub ids, folders or GGUF files) and check they share a tokenizer.

    A GGUF file is a whole path, or a file name inside the folder given as ``target``/``draft``.
    With neither a source nor a GGUF file, the handout's Qwen2.5 ids are used.
    """
    if target is None and target_gguf is None:
        target = DEFAULT_TARGET
    if draft is None and draft_gguf is None:
        draft = DEFAULT_DRAFT
    device, default_dtype = pick_device_and_dtype(device)
    dtype = dtype or default_dtype
    target_tok = load_tokenizer(target, gguf_file=target_gguf, role="target tokenizer")
    draft_tok = load_tokenizer(draft, gguf_file=draft_gguf, role="draft tokenizer")
    check_tokenizers_agree(target_tok, draft_tok)
    t_model = load_model(target, gguf_file=target_gguf, device=device, dtype=dtype, role="target")
    d_model = load_model(draft, gguf_file=draft_gguf, device=device, dtype=dtype, role="draft")
    name = f"{target_gguf or target} <- {draft_gguf or draft}"
    vocab = shared_vocab_size(target_tok, t_model, d_model)
    return ModelPair(t_model, d_model, target_tok, vocab, device, dtype, name)


def tiny_config(vocab_size: int, n_layers: int, hidden: int = 64):
    _, transformers = torch_modules()
    return transformers.Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=n_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        initializer_range=0.3,  # peaked next-token distributions, unlike the default 0.02
        tie_word_embeddings=False,
        use_sliding_window=False,
    )


def tiny_pair(
    seed: int = 0,
    vocab_size: int = 320,
    n_layers: int = 4,
    draft_layers: int = 2,
    noise: float = 0.02,
    late_scale: float = 0.3,
    hidden: int = 64,
) -> ModelPair:
    """A random Qwen2 target and a cheaper correlated draft, fp32 on CPU.

    The draft keeps the target's embedding, its first ``draft_layers`` blocks, final norm and
    head, each weight perturbed by ``noise`` times that tensor's standard deviation. The target's
    later blocks write ``late_scale`` times less into the residual stream (their o_proj and
    down_proj are scaled), as if the first blocks did most of the work; that sets alpha. The model
    vocabulary (``vocab_size``) is padded past the tokenizer's 300 tokens, as real configs are.
    """
    torch, transformers = torch_modules()
    tokenizer = ByteTokenizer()
    if vocab_size < len(tokenizer):
        raise ValueError(f"vocab_size: must be >= {len(tokenizer)} (the byte tokenizer), got {vocab_size}")
    if not 1 <= draft_layers <= n_layers:
        raise ValueError(f"draft_layers: must lie in 1..n_layers={n_layers}, got {draft_layers}")
    if noise < 0:
        raise ValueError(f"noise: must be >= 0, got {noise}")
    if late_scale < 0:
        raise ValueError(f"late_scale: must be >= 0, got {late_scale}")
    torch.manual_seed(seed)
    target = transformers.Qwen2ForCausalLM(tiny_config(vocab_size, n_layers, hidden)).eval()
    draft = transformers.Qwen2ForCausalLM(tiny_config(vocab_size, draft_layers, hidden)).eval()
    with torch.no_grad():
        for layer in target.model.layers[draft_layers:]:
            layer.self_attn.o_proj.weight.mul_(late_scale)
            layer.mlp.down_proj.weight.mul_(late_scale)
    state = copy.deepcopy(target.state_dict())
    draft_state = {name: state[name] for name in draft.state_dict()}
    gen = torch.Generator().manual_seed(seed + 1)
    for tensor in draft_state.values():
        if tensor.is_floating_point() and tensor.numel() > 1 and tensor.std() > 0:
            tensor += noise * tensor.std() * torch.randn(tensor.shape, generator=gen)
    draft.load_state_dict(draft_state)
    name = f"tiny-qwen2(seed={seed}, layers {n_layers} <- {draft_layers}, noise {noise}, late {late_scale})"
    return ModelPair(target, draft, tokenizer, len(tokenizer), "cpu", torch.float32, name)
