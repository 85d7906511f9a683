"""The keys of the ``info`` dict, as constants.

Users, wrappers and training code read these; a scattered string literal that drifts
by one character silently reads ``None``. Every step's ``info`` carries every key.
Whatever keeps a step past ``env.step`` parses it once into a typed record
(``vera_env.records.StepRecord.from_info``) and reads fields, not keys.
"""

from __future__ import annotations

__all__ = [
    "ANSWER", "ANSWER_FORCED", "ANSWER_PHASE", "CHECKS", "COMMAND_OUTPUT", "CORRECT", "ERROR",
    "FORCING", "GATED", "GRADE_DETAIL", "INFO_KEYS", "NODE", "NUDGE", "PREFILL", "QUESTION",
    "REWARD_PARTS", "STEP", "STEPS_LEFT", "TASK_ID", "UNSCORABLE", "VERIFICATION_TOTAL",
]

TASK_ID = "task_id"                  # str
QUESTION = "question"                # str
STEP = "step"                        # int: steps taken so far (0 after reset)
STEPS_LEFT = "steps_left"            # int
ERROR = "error"                      # str: why this turn was rejected, "" if it was not
NUDGE = "nudge"                      # str: the note shown in the next observation
COMMAND_OUTPUT = "command_output"    # str: what the model sees of this turn's command
NODE = "node"                        # dict: the node recorded this turn, {} if none
CHECKS = "checks"                    # list[dict]: this turn's executed checks
ANSWER = "answer"                    # str: the released final answer, "" if none
ANSWER_FORCED = "answer_forced"      # bool: this turn released an answer in the extra ask
ANSWER_PHASE = "answer_phase"        # str: phase whose turn released the answer: "open",
                                     # "forced" (ForcedAnswer's reserve), "extra"; "" none
CORRECT = "correct"                  # bool | None: None until graded or when unscorable
GRADE_DETAIL = "grade_detail"        # str
REWARD_PARTS = "reward_parts"        # dict: verification, correctness, penalty
VERIFICATION_TOTAL = "verification_total"  # float: verification reward so far
UNSCORABLE = "unscorable"            # bool: an infrastructure fault, not the model's
FORCING = "forcing"                  # bool: this observation demands an answer
PREFILL = "prefill"                  # str: assistant prefill to use for the next turn
GATED = "gated"                      # int: answers withheld so far by the emission gate

INFO_KEYS = (TASK_ID, QUESTION, STEP, STEPS_LEFT, ERROR, NUDGE, COMMAND_OUTPUT, NODE,
             CHECKS, ANSWER, ANSWER_FORCED, ANSWER_PHASE, CORRECT, GRADE_DETAIL, REWARD_PARTS,
             VERIFICATION_TOTAL, UNSCORABLE, FORCING, PREFILL, GATED)
