#!/usr/bin/env bash
# A fast student from a trained teacher, in at most 20 minutes on 2 cores (issue 58;
# docs/distillation.md): the teacher translates its training sources (beam 5, of its 5-best the
# closest to the reference by chrF), a 3-1 student (one decoder layer) starts from the
# teacher's weights and trains on those translations, a lexical shortlist is learnt, and the
# test split is scored with the speed of both on our engine.
#   ./scripts/distill.sh runs/demo/checkpoints/last.ckpt        # the demo's teacher
#   RUN=runs/my-student ./scripts/distill.sh TEACHER.ckpt        # another run directory
# Time budgets (minutes, each degrading gracefully on a slower machine): DISTILL_MINUTES for
# the teacher's translations (a source not reached keeps its reference; running again goes
# on), and configs/student.yaml's trainer.max_time for training.
set -euo pipefail
cd "$(dirname "$0")/.."
TEACHER=${1:?usage: ./scripts/distill.sh TEACHER_CKPT (e.g. runs/demo/checkpoints/last.ckpt)}
source scripts/setup_env.sh

RUN=${RUN:-runs/student}
DISTILL_MINUTES=${DISTILL_MINUTES:-5}
STUDENT="$RUN/checkpoints/last.ckpt"
mkdir -p "$RUN"
# The distilled corpus is kept (a second run resumes it); the student is trained anew.
rm -rf "$RUN/checkpoints" "$RUN"/version_*

echo "== 1/4 the teacher translates its training sources (at most $DISTILL_MINUTES min)"
seq2seq distill --checkpoint "$TEACHER" --output "$RUN/distilled.tsv" --max-time "$DISTILL_MINUTES"

echo "== 2/4 training the student (configs/student.yaml)"
seq2seq fit --config configs/student.yaml --model.init_from "$TEACHER" \
  --data.modifiers.distilled "$RUN/distilled.tsv" \
  --trainer.logger.init_args.save_dir "$(dirname "$RUN")" \
  --trainer.logger.init_args.name "$(basename "$RUN")" \
  --checkpoint.dirpath "$RUN/checkpoints"

echo "== 3/4 a lexical shortlist from the training pairs"
seq2seq shortlist --checkpoint "$STUDENT" --output "$RUN/shortlist.txt"

echo "== 4/4 the test split, beam 5: student against teacher on our engine"
python scripts/bench.py distill --teacher "$TEACHER" --student "$STUDENT" \
  --shortlist "$RUN/shortlist.txt" --runs teacher:ours,student:ours,student:ours+sl \
  --json "$RUN/speed.json"

echo
echo "Student (self-contained: config, tokenizer inside): $STUDENT"
echo "Its shortlist: $RUN/shortlist.txt (seq2seq translate --shortlist); figures: $RUN/speed.json"
