"""docs/KERNEL.md's "Check your kernel" examples, runnable: an engine-style kernel in vLLM V0's and in
SGLang's calling convention (here the project's own reference, written in each convention by
``specverify.adapters.kernels.to_*``; in your code, your engine's function), wrapped into the
canonical kernel interface. tests/test_kernel_interface.py checks them with the CLI."""

from specverify.adapters.kernels import from_sglang_chain, from_vllm_v0, to_sglang_chain, to_vllm_v0
from specverify.samplers.reference_kernel import reference_generator_kernel, reference_kernel

# what an engine ships (stand-ins: the reference in the engine's own signature)
vllm_v0_forward = to_vllm_v0(reference_generator_kernel)  # RejectionSampler.forward(...)
sglang_chain_triton = to_sglang_chain(reference_kernel)  # chain_speculative_sampling_triton(...)

# docs/KERNEL.md's two lines: each engine's function, adapted to the kernel interface
vllm_style = from_vllm_v0(vllm_v0_forward)  # draws from a torch.Generator: statistics
sglang_style = from_sglang_chain(sglang_chain_triton)  # takes its uniforms: judged exactly
