"""The border between the grader's kernel and the answer's (grader/grading/remote.py), with a real
kernel on the answer's side: what crosses it, and where a test's ranks start."""

import os

import pytest
import torch
from jupyter_client.manager import start_new_kernel

from grader.grading import record, remote
from grader.launch import launch

ANSWER = '''
import os


def parent_of_rank():
    return os.getppid()


def lies():
    class Always:
        def __eq__(self, other):
            return True
    return Always()


def doubles(t):
    t.mul_(2)
    return t.sum()
'''


@pytest.fixture(scope="module")
def answers():
    """A real kernel holding an answer; this process plays the grader's kernel."""
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        reply = kc.execute_interactive(ANSWER, timeout=60)
        assert reply["content"]["status"] == "ok", reply["content"]
        os.environ[remote.ANSWERS] = km.connection_file
        yield km.provisioner.pid
    finally:
        os.environ.pop(remote.ANSWERS, None)
        if remote._client is not None:
            remote._client.stop_channels()
            remote._client = None
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_ranks_that_run_the_answers_code_start_from_the_answers_kernel(answers):
    train = remote.Remote("parent_of_rank")

    def on_rank():  # a test's own function, calling the student's
        return train()

    assert launch(on_rank, nprocs=2, show_output=False) == [answers, answers]
    # A launch of the toolkit's or the test's own code alone stays in the grader's kernel.
    assert launch(os.getppid, nprocs=2, show_output=False) == [os.getpid()] * 2


def test_a_tests_own_function_runs_beside_the_answer_and_only_data_comes_back(answers):
    assert record.beside_answer(os.getpid) == answers
    with pytest.raises(remote.AnswerError, match="cannot take as data"):
        remote.Remote("lies")()


def test_the_answer_gets_copies_and_what_it_did_to_them_comes_back_as_data(answers):
    t = torch.ones(3)
    assert remote.Remote("doubles")(t).item() == 6
    assert t.tolist() == [2.0, 2.0, 2.0]  # written back, as data, into the test's tensor
