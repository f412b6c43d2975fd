"""Kernel threads: TVM's runtime gets the thread count asked for, in this process and in those it starts.

Each check runs in a fresh interpreter, since a process fixes its thread count when its first kernel runs.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.tvm


_TVM = "from tunewise.tuning import tvm_env; tvm_env.import_tvm(); import tvm"  # as the tunewise program imports it


def _python(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; the words it printed."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs: TVM caps the threads at the CPU count")
def test_use_threads_sets_this_process_and_its_children():
    # all the CPUs: TVM's own default is half of them
    count = str(os.cpu_count())
    own, child = _python(f"""
        import subprocess, sys
        {_TVM}
        tvm_env.use_threads({count})
        print(tvm.runtime.num_threads())
        subprocess.run([sys.executable, "-c", "{_TVM}; print(tvm.runtime.num_threads())"], check=True)
    """)
    assert (own, child) == (count, count)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs: TVM caps the threads at the CPU count")
def test_use_threads_warns_when_kernels_already_fixed_the_count():
    before, after, warned = _python(f"""
        import warnings
        {_TVM}
        before = tvm.runtime.num_threads()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tvm_env.use_threads(before + 1)
        print(before, tvm.runtime.num_threads(), sum(issubclass(w.category, RuntimeWarning) for w in caught))
    """)
    assert before == after and warned == "1"


def test_use_threads_rejects_zero():
    from tunewise.tuning import tvm_env

    with pytest.raises(ValueError, match="thread count"):
        tvm_env.use_threads(0)
