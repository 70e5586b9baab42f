"""bench/plot.py draws what its inputs say: the copy-bandwidth chart gains an Inductor bar where the peer JSON
carries Inductor's times, and the chart against Inductor counts the cases at or above 1.0x, lets a repeat run's
cases replace the first run's, and refuses files of two devices. Synthetic inputs; no GPU, no torch."""
import json
import subprocess
import sys
import xml.dom.minidom
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLOT = REPO / "bench" / "plot.py"


def run(tmp_path, *args):
    return subprocess.run([sys.executable, str(PLOT), *args], capture_output=True, text=True, cwd=tmp_path)


def bars(svg_path, color):
    doc = xml.dom.minidom.parse(str(svg_path))
    return [float(r.getAttribute("width")) for r in doc.getElementsByTagName("rect")
            if r.getAttribute("fill") == color and r.getAttribute("y") != "32"]  # y 32: the legend's swatches


def write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return str(path)


def test_copy_chart_draws_an_inductor_bar_only_where_the_peer_json_has_one(tmp_path):
    jitune = {"device": "GPU X", "copy_gbs": 1000.0,
              "cases": [{"case": "a", "pct_copy": 90.0}, {"case": "b", "pct_copy": 50.0}]}
    plain = {"torch": "2.x", "cases": [{"case": "a", "pct_copy": 45.0, "bytes": 1e6},
                                       {"case": "b", "pct_copy": 25.0, "bytes": 1e6}]}
    with_inductor = {"torch": "2.x", "cases": [{"case": "a", "pct_copy": 45.0, "bytes": 1e6, "inductor_us": 2.0},
                                               {"case": "b", "pct_copy": 25.0, "bytes": 1e6, "inductor_us": 4.0}]}
    j = write(tmp_path, "j.json", jitune)
    r = run(tmp_path, j, write(tmp_path, "p.json", plain), "--out", "plain.svg")
    assert r.returncode == 0, r.stderr
    assert bars(tmp_path / "plain.svg", "#2ca02c") == []
    assert "Inductor" not in (tmp_path / "plain.svg").read_text()
    r = run(tmp_path, j, write(tmp_path, "i.json", with_inductor), "--out", "ind.svg")
    assert r.returncode == 0, r.stderr
    blue, green = bars(tmp_path / "ind.svg", "#1f77b4"), bars(tmp_path / "ind.svg", "#2ca02c")
    # 1e6 bytes in 2 us is 500 GB/s, 50% of the 1000 GB/s copy: the same length as jitune's 50% bar of case b.
    assert len(green) == 2
    assert abs(green[0] - blue[1]) < 0.2
    assert abs(green[1] - blue[1] / 2) < 0.2
    assert "Inductor" in (tmp_path / "ind.svg").read_text()


def vsi(device, cases):
    return {"device": device, "torch": "2.x", "cases": [
        {"case": name, "jitune_hidden_us": j, "inductor_hidden_us": i, "jitune_correct": True,
         "inductor_correct": True} for name, j, i in cases]}


def test_ratio_chart_counts_cases_and_takes_a_repeat_runs_cases(tmp_path):
    first = write(tmp_path, "first.json", vsi("GPU X", [("fast", 1.0, 2.0), ("slow", 2.0, 1.0), ("even", 3.0, 3.0)]))
    r = run(tmp_path, "--vs-inductor", first, "--out", "one.svg")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "one.svg").read_text()
    assert "2 of 3 cases at or above 1.0x" in text
    assert "2.000x" in text and "0.500x" in text and "1.000x" in text
    assert len(bars(tmp_path / "one.svg", "#d62728")) == 1  # "slow", behind
    again = write(tmp_path, "again.json", vsi("GPU X", [("slow", 1.0, 1.5)]))
    r = run(tmp_path, "--vs-inductor", first, "--vs-inductor", again, "--out", "two.svg")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "two.svg").read_text()
    assert "3 of 3 cases at or above 1.0x" in text
    assert "1 cases from a repeat run" in text
    assert "1.500x" in text and "0.500x" not in text
    xml.dom.minidom.parse(str(tmp_path / "two.svg"))


def test_ratio_chart_refuses_two_devices_and_mixed_arguments(tmp_path):
    a = write(tmp_path, "a.json", vsi("GPU X", [("c", 1.0, 1.0)]))
    b = write(tmp_path, "b.json", vsi("GPU Y", [("c", 1.0, 1.0)]))
    r = run(tmp_path, "--vs-inductor", a, "--vs-inductor", b, "--out", "x.svg")
    assert r.returncode != 0 and "different devices" in r.stderr
    r = run(tmp_path, a, "--vs-inductor", a, "--out", "x.svg")
    assert r.returncode != 0 and "give no bench JSON" in r.stderr
    r = run(tmp_path, a, "--out", "x.svg")
    assert r.returncode != 0 and "--vs-inductor" in r.stderr
