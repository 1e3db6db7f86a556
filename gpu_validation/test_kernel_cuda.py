"""The kernel interface on CUDA: the reference kernel and three kernel mutants, their tensors on
the GPU, each subject in a spawned process (CUDA cannot start in a forked one). Needs torch and
a CUDA device only (no model weights); skipped with one line elsewhere (conftest.py).

Verdicts are exact computations from explicit uniforms (no sampling noise) except the generator
form of the reference, judged by the quick budget's chi-square (false-fail rate 1e-6, seed 0).
"""

import pytest

import specverify
from specverify.mutants import get


def _check(target: str):
    return specverify.check(target, budget="quick", interface="kernel", device="cuda")


def test_the_reference_kernel_is_exact_on_cuda():
    report = _check("specverify.samplers.reference_kernel:reference_kernel")
    assert report.exact is True, report.findings
    assert not [f for f in report.findings if f.kind == "edge"]


def test_the_generator_reference_is_exact_on_cuda():
    report = _check("specverify.samplers.reference_kernel:reference_generator_kernel")
    assert report.exact is True, report.findings
    assert report.result.power


MUTANT_CASES = [
    ("kernel/ratio-float16", False, "distribution"),
    ("kernel/residual-next-position", False, "distribution"),
    ("kernel/accept-less-equal", True, "edge"),
]


@pytest.fixture(params=MUTANT_CASES, ids=[case[0] for case in MUTANT_CASES])
def mutant_case(request):
    """(mutant id, expected verdict, expected finding kind). A fixture's params, not
    ``pytest.mark.parametrize``: a marked test reports its skip with a line number, so the five
    skips would print as two lines instead of one."""
    return request.param


def test_kernel_mutants_on_cuda(mutant_case, tmp_path):
    mutant_id, verdict, kind = mutant_case
    # a TARGET the spawned process can import: the mutant's function by its catalogue id
    module = tmp_path / "subject.py"
    module.write_text(f"from specverify.mutants import get\nkernel = get({mutant_id!r}).fn\n")
    report = _check(f"{module}:kernel")
    assert report.exact is verdict, report.findings
    assert any(f.kind == kind for f in report.findings)
    assert get(mutant_id).interface == "kernel"
