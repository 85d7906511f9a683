"""A teacher of real analysis in three short turns: compute, re-derive, answer.

Why this exists. ``BriefTeacher`` pins a file's line count -- a fingerprint of the data
that earns no verification -- and answers with the privileged reference answer; a model
fine-tuned on it learned exactly that (fingerprint-node share 1.0, accuracy 2.6% on the
held-out set). This teacher does what the project rewards: one shell one-liner that
COMPUTES the answer from the data, a node whose check re-runs that computation and
compares it with the value the observation showed, and an answer that is the same
value. Every value it writes is read from the observation's command window, never from
``task.answer``: its turns are right only because the computation was.

The one-liners are written for the 13 builtin types at the ``warmup`` and ``easy``
difficulties (the same command is right at both; their parameters -- gene, column,
sample, motif -- are read from the question). The command is saved as ``q.sh`` so that
the check re-runs it in a few tokens (strength testing replays the file-writing command
on each variant, so the check still sees the varied data). ``q.sh`` prints the answer on
line 1 and one or two intermediates of the computation on lines 2-3 (``INTERMEDIATES``),
so every check reads one line (``sh q.sh | sed -n 1p``). Tokens per turn in the tiny
tokenizer (``vera_env.training.tiny``, about SmolLM2's count): the command 101-176
(SmolLM2 98-204 before the intermediates, 2-40 more now), the node 68 with one check and
116-162 with the extra checks (under the 208 of ``learning_curve.py --turn-tokens``),
the answer <= 14.

**Evidence** (``evidence``, ``vera_env.training.scripts.collect --analyst-evidence``). One check
that recomputes the answer is one fact, 1/12 of the verification an episode can earn: every
mutant moves the answer, so any rewrite of that check rejects the same mutants. A check on
an intermediate (the rows averaged, the transitions) moves on some kinds of mutation and
not on others, or is varied through another file: another fact. With ``evidence`` > 0 a
share of tasks (chosen by a hash of the task id, so not by family) declare a node that
also checks lines 2-3 -- the values read from the command's output, like the answer --
and the rest check line 1 only; the command turn is the same either way, so GRPO sees
one decision, the node's, rewarded differently. Each intermediate was kept only where
the harness measured it to earn (``benchmarks/teacher_evidence.py``): on sentinel_mean,
label_coding, doublets, knockout_gene, longest_orf and trio_parentage one did, on the
other seven two (easy, seeds 0-2). label_coding's, the rows coded 0, is read without the
codebook (a count that reads it moves with the answer's codebook mutants: the same
fact); it is the malignant count from easy up (sklearn's 0 = malignant), but at warmup
(1 = malignant) it counts benign rows, which a control drops, and earns nothing.

    python -m vera_env.training.scripts.collect --policy analyst --observation-variant compact ...

**Repair** (``repair``, ``vera_env.training.scripts.collect --analyst-repair``). A model fine-tuned on
this teacher never saw a command fail, so it never retried one: on a family whose
harder files are gzipped it read the ``.gz`` as text, the error stood on screen, and
its next turns declared and answered anyway (0 of 32 sampled episodes retried,
``benchmarks/README.md``). With ``repair`` > 0 a share of tasks (chosen by task id)
open with a deliberate, realistic mistake -- the data file's name misspelt, or a quote
left unclosed -- whose error the observation shows, and the next turn runs the right
command. The mistaken turn is reported by ``deliberate_mistake``, so the collected row
marks it ``learn`` False and SFT trains on the repair, never on the mistake.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from vera_env import info as keys
from vera_env.tasks import TaskSource

__all__ = ["INTERMEDIATES", "AnalystTeacher", "analysis_command", "mistaken_command"]

_MTX = "/^%/{m=1;next} !m"  # features/barcodes first, then the matrix body
_SUMMARY = "the answer computed from the data is"
# The computation is saved as a script so that the check re-runs it in a few tokens.
_SCRIPT = "cat > q.sh <<'E'\n{}\nE\nsh q.sh"
_MAX_INTERMEDIATES = 2


def _q(pattern: str, question: str, default: str = "") -> str:
    found = re.search(pattern, question)
    return found.group(1) if found else default


def _doublets(q: str) -> str:
    t, b = (re.findall(r"express (\w+)", q) + ["Cd3e", "Cd19"])[:2]
    k = _q(r"at least (\d+) counts", q, "3")
    return ("zcat features.tsv.gz matrix.mtx.gz | awk '" + _MTX
            + f'{{t=$2=="{t}"?NR:t;b=$2=="{b}"?NR:b;next}} h++&&$3>={k}'
            + "{x[$1]+=($2==t)+2*($2==b)} END{for(c in x){n+=x[c]==3;u+=x[c]%2}print n+0;print u}'")


def _knockout(q: str) -> str:
    return ("zcat genes.tsv.gz barcodes.tsv.gz matrix.mtx.gz | awk 'NR==FNR{g[$1]=$2;"
            'n+=$2=="control";next} ' + _MTX + "{NF>1?s[++i]=$2:t[++j]=g[$1];next} "
            'h++&&$3{t[$2]=="treated"?z[$1]=1:d[$1]++} '
            "END{for(k in s)if(!z[k]&&d[k]>=n/2)print s[k];print n}' cells.tsv -")


def _qc_cells(q: str) -> str:
    total, pct = _q(r"at least (\d+)", q, "1000"), _q(r"less than (\d+)%", q, "15")
    return ("zcat genes.tsv.gz matrix.mtx.gz | awk '" + _MTX
            + "{mt[NR]=$2~/^mt-/;next} h++{t[$2]+=$3;x[$2]+=mt[$1]*$3;z+=$3} "
            + f"END{{for(c in t){{m+=t[c]>={total};n+=t[c]>={total}&&x[c]<{pct}*t[c]/100}}print n;print m;print z}}'")


def _gc(q: str) -> str:
    file = _q(r"of (\S+\.fa(?:\.gz)?)", q, "genome.fa.gz")
    return (f"zcat -f {file} | awk '!/^>/{{s=toupper($0);g+=gsub(/[GC]/,\"\",s);"
            "a+=gsub(/[AT]/,\"\",s)} END{printf \"%.2f\\n%d\\n%d\\n\",100*g/(g+a),g,g+a}'")


def _orf(q: str) -> str:
    file = _q(r"in (\S+\.fa)\b", q, "transcripts.fa")
    return (f"python3 -c \"import re;s=re.sub('>.*','|',open('{file}').read())"
            ".replace('\\n','').upper();s+='|'+s[::-1].translate(str.maketrans('ACGT','TGCA'));"
            "print(max(map(len,re.findall('(?=(ATG(?:[^|]{3})*?)(?:TAA|TAG|TGA))',s)))//3,len(s),"
            "sep='\\n')\"")


def _motif(q: str) -> str:
    motif, file = _q(r"motif ([ACGT]+)", q), _q(r"of (\S+\.fa(?:\.gz)?)", q, "seqs.fa.gz")
    rev = motif[::-1].translate(str.maketrans("ACGT", "TGCA"))
    return ("python3 -c \"import re,gzip;R=gzip.open('" + file + "','rt').read().upper()"
            ".split('>')[1:];c=[sum(len(re.findall(m,''.join(r.split('\\n')[1:]))) for r in R) "
            f"for m in ['(?={motif})','(?={rev})']];print(sum(c),*c,sep='\\n')\"")


def _fold_change(q: str) -> str:
    gene = _q(r"fold change of (\S+) between", q)
    return ("awk 'NR==FNR{c[$1]=substr($2,1,1);next} FNR<2{split($0,h)} "
            f'$1=="{gene}"{{for(i=2;i<=NF;i++){{s[c[h[i]]]+=2^$i-1;n[c[h[i]]]++;t+=2^$i-1;m=$i>m?$i:m}}}} '
            'END{printf "%.3f\\n%.3f\\n%.3f\\n",s["t"]/n["t"]*n["c"]/s["c"],t,m}\' samples.tsv expression.tsv')


def _label_coding(q: str) -> str:
    col = _q(r"mean (\S+) of the malignant", q)
    return ("awk -F, -v m=\"$(grep -o '[01] = malignant' codebook.txt | cut -c1)\" "
            f"'NR==1{{for(i=1;i<=NF;i++)if($i==\"{col}\")c=i;next}} $NF==m{{s+=$c;n++}} $NF==0{{z++}} "
            "END{printf \"%.2f\\n%d\\n\",n?s/n:0,z;exit !n}' tumours.csv")


def _sentinel(q: str) -> str:
    col, species = _q(r"mean (\S+) ", q), _q(r"of (\w+) penguins", q)
    return (f"awk -F, 'NR==1{{for(i=1;i<=NF;i++)if($i==\"{col}\")c=i;next}} "
            f"$2==\"{species}\"&&$c!=-999&&$c!=\"NA\"&&$c!=\"\"{{s+=$c;n++}} "
            "END{printf \"%.2f\\n%d\\n\",s/n,n}' penguins.csv")


def _survival(q: str) -> str:
    arm = _q(r"of arm (\w+)", q, "B")
    return (f"awk -F, '$2==\"{arm}\"{{print $3,$4}}' survival.csv | sort -k1n -k2r | "
            f"awk -v r=$(grep -c ,{arm}, survival.csv) "
            "'NR<2{s=1;n=r} $2{s*=1-1/r;d++} {r--} s<.5+1e-9&&!m{m=$1} END{print m;print n;print d}'")


def _het(q: str) -> str:
    sample, file = _q(r"sample (\S+) heterozygous", q), _q(r"in (\S+\.vcf\.gz)", q)
    return (f"zcat {file} | awk '/^#C/{{for(i=10;i<=NF;i++)if($i==\"{sample}\")c=i}} "
            "!/^#/&&$c~/^[0-9][\\/|][0-9]/{h=substr($c,1,1)!=substr($c,3,1);n+=h;k+=$c~/^0\\/1/;p+=h&&$c~/^.[|]/} "
            "END{print n+0;print k+0;print p+0}'")


def _titv(q: str) -> str:
    file = _q(r"in (\S+\.vcf\.gz)", q, "variants.vcf.gz")
    return (f"zcat {file} | awk '!/^#/&&$4~/^[ACGT]$/&&$5~/^[ACGT]$/{{x=$4$5;"
            "if(x~/AG|GA|CT|TC/)i++;else v++} END{printf \"%.3f\\n%d\\n%d\\n\",i/v,i,v}'")


def _trio(q: str) -> str:
    child = _q(r"child \((\S+)\)", q)
    men = _q(r"men \(([^)]*)\)", q).replace(", ", "|")
    return (f"zcat calls.vcf.gz | awk '/^#C/{{for(i=10;i<=NF;i++)if((h[i]=$i)==\"{child}\")k=i}} "
            "!/^#/{for(i=10;i<=NF;i++)x[h[i]]+=(substr($i,1,3)substr($k,1,3))~/0.01.1|1.10.0/} "
            f"END{{for(s in x)print x[s],s}}' | grep -wE '{men}' | sort -n | awk 'NR<2{{print $2;print $1}}'")


_COMMANDS: dict[str, Callable[[str], str]] = {
    "mtx.doublets": _doublets, "mtx.knockout_gene": _knockout, "mtx.qc_cells": _qc_cells,
    "seq.gc_content": _gc, "seq.longest_orf": _orf, "seq.motif_count": _motif,
    "tab.fold_change": _fold_change, "tab.label_coding": _label_coding,
    "tab.sentinel_mean": _sentinel, "tab.survival_median": _survival,
    "vcf.het_count": _het, "vcf.titv": _titv, "vcf.trio_parentage": _trio,
}
_KINDS = {"mtx": "qc", "seq": "transform", "tab": "transform", "vcf": "qc"}
INTERMEDIATES: dict[str, tuple[str, ...]] = {
    "mtx.doublets": ("cells high in the first marker",),
    "mtx.knockout_gene": ("control cells",),
    "mtx.qc_cells": ("cells with enough counts", "total counts"),
    "seq.gc_content": ("G+C bases", "A+C+G+T bases"),
    "seq.longest_orf": ("characters of both strands scanned",),
    "seq.motif_count": ("forward matches", "reverse-complement matches"),
    "tab.fold_change": ("the gene's linear total", "the gene's largest log value"),
    "tab.label_coding": ("rows coded 0",),
    "tab.sentinel_mean": ("rows averaged",),
    "tab.survival_median": ("patients in the arm", "events in the arm"),
    "vcf.het_count": ("0/1 calls", "phased heterozygous calls"),
    "vcf.titv": ("transitions", "transversions"),
    "vcf.trio_parentage": ("the fewest Mendel conflicts",),
}
"""What each one-liner prints after the answer (line 1), one entry per line: each is a
fact of the data that the harness measured to move on some kinds of mutation and not on
others, or to be varied through another file than the answer (``benchmarks/
teacher_evidence.py``), so its check earns beyond the answer's."""


def analysis_command(task_type: str, question: str) -> str:
    """The one-liner that computes the answer of a ``task_type`` task from its data.

    Raises:
        KeyError: No one-liner is written for ``task_type``.
    """
    return _COMMANDS[task_type](question)


def mistaken_command(command: str, key: str) -> str:
    """``command`` with a mistake an analyst makes, chosen by ``key``: the first data
    file's name misspelt (a letter dropped before its extension), or its last quote left
    unclosed. Either fails with an error on screen. (Not a misspelt name for ``zcat``:
    in the sandbox gzip reports a missing file as "Function not implemented", its errno
    overwritten by the refused ``getrandom`` of glibc's first allocation.)"""
    file = _first_file(command)
    stem, dot, rest = file.partition(".")
    if (zlib.crc32(f"kind|{key}".encode()) % 2 == 0 and len(stem) > 1 and dot
            and "zcat" not in command):
        return command.replace(file, stem[:-1] + dot + rest, 1)
    quote = max(("'", '"'), key=command.rfind)
    cut = command.rfind(quote)
    return command if cut < 0 else command[:cut] + command[cut + 1:]


def _chosen(key: str, share: float, salt: str = "repair") -> bool:
    return zlib.crc32(f"{salt}|{key}".encode()) / 2**32 < share


def _task_type(task_id: str) -> str:
    return ".".join(task_id.split(".")[:2])


class AnalystTeacher:
    """Compute the answer with one command, re-derive it in a check, answer with it.

    Stateless across calls (the turn is chosen by the observation and ``info``), so one
    instance serves many concurrent episodes. When the command's output cannot be read
    (an error, an empty line), it runs the command again until the forced answer, then
    answers "unknown" -- never with the privileged answer.

    Args:
        tasks: The task source the environment draws from (for questions and types).
        repair: Share of tasks (by task id) whose first command is a deliberate mistake
            (``mistaken_command``) that the next turn repairs (see the module docstring).
    """

    def __init__(self, tasks: TaskSource, repair: float = 0.0, evidence: float = 0.0) -> None:
        for name, share in (("repair", repair), ("evidence", evidence)):
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name} is a share in [0, 1], got {share}")
        self._tasks, self._repair, self._evidence = tasks, repair, evidence

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next short turn."""
        task = self._tasks.get(info[keys.TASK_ID])
        command = _SCRIPT.format(analysis_command(_task_type(task.id), task.question))
        value = _printed(observation, command)
        prefill = str(info.get(keys.PREFILL) or "")
        if prefill:
            return prefill + (value or "unknown")
        if value is None:
            mistake = self._mistake(task)
            if mistake is not None and f"$ {mistake}" not in observation:
                return f"<command>{mistake}</command>"
            return f"<command>{command}</command>"
        if "(checks" not in observation:
            extra = _intermediates(observation, command) if self.extra_checks(task.id) else []
            return _node(task, command, value, extra)
        return f"FINAL ANSWER: {value}"

    def deliberate_mistake(self, action: str, info: dict[str, Any]) -> bool:
        """Whether ``action`` is this task's deliberate mistake (not to be imitated)."""
        mistake = self._mistake(self._tasks.get(info[keys.TASK_ID]))
        return mistake is not None and action == f"<command>{mistake}</command>"

    def _mistake(self, task: Any) -> str | None:
        if not _chosen(task.id, self._repair):
            return None
        one_liner = analysis_command(_task_type(task.id), task.question)
        return _SCRIPT.format(mistaken_command(one_liner, task.id))

    def extra_checks(self, task_id: str) -> bool:
        """Whether this task's node also checks the intermediates (``evidence``)."""
        return _chosen(task_id, self._evidence, "evidence")


def _node(task: Any, command: str, value: str, intermediates: Sequence[str] = ()) -> str:
    """The node declaring ``value`` with a check that recomputes it from the data, and
    one check per intermediate (``intermediates[i]`` is line ``i + 2`` of ``q.sh``)."""
    family = _task_type(task.id).split(".")[0]
    artifact = _first_file(command.split("\n")[1])
    lines = [f'NODE kind={_KINDS[family]} summary="{_SUMMARY} {value}" artifact={artifact}']
    for line, shown in enumerate((value, *intermediates), start=1):
        lines.append(f'CHECK range "q.sh line {line} is {shown}" :: '
                     f'test "$(sh q.sh | sed -n {line}p)" = "{shown}" && echo True || echo False')
    return "\n".join(lines)


def _printed(observation: str, command: str) -> str | None:
    """The first token printed right after ``$ command`` in the observation's window."""
    found = re.findall(re.escape(f"$ {command}") + r"\n[ \t]*([^\s$][^\s]*)", observation)
    # Once the window has scrolled on, the value is still in the node it declared.
    # (Only the graph: the rules' example node has the same summary with its own value.)
    graph = observation.rpartition("ANALYSIS SO FAR")[2]
    found = found or re.findall(re.escape(_SUMMARY) + r" ([^\s\"\[]+)", graph)
    return found[-1] if found else None


def _intermediates(observation: str, command: str) -> list[str]:
    """The values ``command`` printed on the lines after its answer (at most
    ``_MAX_INTERMEDIATES``), in the last window that shows its output; none where a
    line is not one value (an error, a scrolled window)."""
    before, found, after = observation.rpartition(f"$ {command}\n")
    shown = after.splitlines()[1:1 + _MAX_INTERMEDIATES] if found else []
    values: list[str] = []
    for line in shown:
        if not re.fullmatch(r"-?[\w.]+", line.strip()):
            break
        values.append(line.strip())
    return values


def _first_file(command: str) -> str:
    """The first data file the command names (the node's artifact)."""
    found = re.search(r"[\w.-]+\.(?:gz|fa|tsv|csv|txt)\b", command)
    return found.group(0) if found else "."
