"""Helpers of several debugging families (this package's only): planting the bugs a
spec's sampled skills ask for."""

from __future__ import annotations

from tmax.generate.family import RenderContext

SKILL_BUGS = {
    "fix an off-by-one error in loop bounds": ("len(lines) - 1", "lines[1:-1]", "tail -n +3",
                                               "i < n - 1"),
    "fix tie handling in a custom sort comparator": ("reverse=True", "-k1,1r", "strcmp(b->name"),
}  # fmt: skip
"""The planted bugs (a piece of the buggy line) that realise a primitive skill: a spec
that samples the skill gets one of them planted."""


def plant(ctx: RenderContext, template: list, count: int) -> list[int]:
    """The indices of ``count`` buggy lines of ``template`` to plant: first those the
    spec's sampled skills ask for (:data:`SKILL_BUGS`), the rest at random."""
    candidates = [i for i, (_, bug) in enumerate(template) if bug is not None]
    pieces = [p for skill in ctx.spec.primitive_skills for p in SKILL_BUGS.get(skill, ())]
    wanted = [i for i in candidates if any(p in template[i][1] for p in pieces)]
    rest = [i for i in candidates if i not in wanted]
    chosen = wanted + ctx.rng.sample(rest, max(0, min(len(rest), count - len(wanted))))
    if wanted:
        ctx.rng.shuffle(chosen)
    return chosen
