"""--cpu-repack: llama.cpp's system info decides whether weights are repacked (AMX crashes the first decode)."""

from __future__ import annotations

from click.testing import CliRunner

from mcp_sim.cli import cli
from mcp_sim.engines.llama.build import build_info, cpu_repack, repack_choice

SAPPHIRE_RAPIDS = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
                   "AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 "
                   "| OPENMP = 1 | REPACK = 1 |")
ZEN4 = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
        "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |")
APPLE = "CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | DOTPROD = 1 | LLAMAFILE = 1 | ACCELERATE = 1 | REPACK = 1 |"


def test_auto_turns_repacking_off_on_amx_only() -> None:
    amx = repack_choice("auto", SAPPHIRE_RAPIDS)
    assert not amx.use_extra_bufts and "AMX" in amx.reason and "#20824" in amx.reason
    assert repack_choice("auto", ZEN4).use_extra_bufts
    assert repack_choice("auto", APPLE).use_extra_bufts
    assert repack_choice("auto", SAPPHIRE_RAPIDS.replace("AMX_INT8 = 1", "AMX_INT8 = 0")).use_extra_bufts


def test_on_and_off_are_obeyed_and_on_warns_on_amx() -> None:
    forced = repack_choice("on", SAPPHIRE_RAPIDS)
    assert forced.use_extra_bufts and "may crash" in forced.reason
    assert "crash" not in repack_choice("on", ZEN4).reason
    assert not repack_choice("off", ZEN4).use_extra_bufts


def test_doctor_says_what_it_chose_for_this_machine() -> None:
    result = CliRunner().invoke(cli, ["doctor"])
    expected = cpu_repack("auto")
    line = next(line for line in result.output.splitlines() if "cpu repack" in line)
    assert expected.reason in line
    assert ("AMX_INT8 = 1" in build_info()["system_info"]) == (not expected.use_extra_bufts)


def test_doctor_probes_a_decode_in_a_child_and_reports_its_crash_with_the_fix() -> None:
    """The probe runs the real model in a child process: on this machine's CPU, the defaults decode; forcing
    the repacked weights on a CPU with AMX crashes the child (llama.cpp #20824), and doctor names the fix."""
    fine = CliRunner().invoke(cli, ["doctor"])
    assert "[ ok ] decode probe: a child process loaded the model and decoded: " in fine.output, fine.output
    forced = CliRunner().invoke(cli, ["doctor", "--cpu-repack", "on"])
    probe = next(line for line in forced.output.splitlines() if "decode probe" in line)
    if "AMX_INT8 = 1" in build_info()["system_info"]:
        assert probe.startswith("[FAIL] decode probe: a short decode in a child process died: SIGSEGV"), probe
        assert "--cpu-repack off" in probe and forced.exit_code != 0
    else:
        assert probe.startswith("[ ok ] decode probe"), probe
