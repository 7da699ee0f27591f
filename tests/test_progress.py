"""Long loops report whole lines without a terminal (a recipe's log, a batch job), at most every
interval, with an ETA, and one line at the end of a loop that lasted an interval."""

from fairseq_maskplug.common.progress import LineProgress, progress_bar


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_line_every_interval_with_the_share_and_time_left_and_one_at_the_end():
    clock, lines = Clock(), []
    bar = LineProgress(total=3200, desc="PLT", unit="copy", interval=30, clock=clock, write=lines.append)
    for step in range(32):  # 100 copies every 5 seconds
        clock.now += 5
        bar.update(100)
    bar.close()
    bar.close()  # once
    assert lines[0] == "PLT: 600/3,200 copy (19%), 30 s, about 2.2 min left"
    assert len(lines) == 160 // 30 + 1 and lines[-1] == "PLT: 3,200/3,200 copy (100%), 2.7 min: done"


def test_iteration_without_a_total_and_without_a_terminal(capsys, monkeypatch):
    monkeypatch.setenv("MASKPLUG_PROGRESS_SECONDS", "0")
    assert list(progress_bar(iter(range(3)), desc="index pass 1/2", unit="doc")) == [0, 1, 2]
    err = capsys.readouterr().err.splitlines()  # pytest's stderr is no terminal
    assert [line.split(",")[0] for line in err] == ["index pass 1/2: 1 doc", "index pass 1/2: 2 doc",
                                                    "index pass 1/2: 3 doc", "index pass 1/2: 3 doc"]
    assert err[-1].endswith(": done")
    assert list(progress_bar(range(2), disable=True)) == [0, 1] and not capsys.readouterr().err
    clock, lines = Clock(), []
    short = LineProgress(range(5), desc="encode", interval=30, clock=clock, write=lines.append)
    assert list(short) == list(range(5)) and lines == []  # a loop shorter than the interval: silent
