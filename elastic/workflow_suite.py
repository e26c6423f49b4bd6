"""Published workflow structures beyond the ASA paper's three, as built-in shapes (plain data).

Each shape is a stage DAG at the ASA paper's smallest scale (widest stage 28 cores;
:func:`elastic.report.scaling.scale_workflow` widens it to 56 and 112), with parallel branches, long
chains and multi-core tasks where the real workflow has them. :mod:`elastic.workflow` builds them into
:data:`~elastic.workflow.BUILTIN_WORKFLOWS`; this module holds only numbers, so it imports nothing.

Where the numbers come from
---------------------------
- **Structure** (task types, what depends on what): the WfCommons ``wfchef`` recipes (1000Genome,
  Epigenomics, Seismology, SoyKB, SRASearch, BWA) and the Pegasus workflow generator (CyberShake). A
  stage is one task type; its task count is chosen so the widest stage is 28 cores, with the recipes'
  fan-out ratios kept where they are fixed (e.g. 1000Genome: one ``sifting`` and one
  ``individuals_merge`` per chromosome, 7 ``individuals`` chunks per chromosome).
- **Relative runtimes and their spread**: the mean and standard deviation of the runtime distribution
  each recipe fitted for the task type (``task_type_stats.json``: the distribution on ``[min, max]``),
  and for CyberShake the generator's truncated normals (ExtractSGT 137.45 s, sd 206 s;
  SeismogramSynthesis 43.40 s, sd 31 s; PeakValCalcOkaya 1.09 s, sd 1.93 s; the two zips from their
  rates, under a second). The recipes' executions are small test inputs (a critical path of seconds to
  minutes), so each workflow's runtimes are multiplied by one factor that makes its critical path about
  an hour, the scale of the paper's workflows; the factor is given per shape below. Runtimes are
  rounded to 10 s and floored at 60 s; a coefficient of variation is capped at 1.5.
- **Multi-core tasks** are our choice, from the tools' thread options, since the recipes record one
  core per task: ``bwa mem -t``, ``bowtie2 -p`` and SoyKB's alignment (BWA) run 4 cores per task.

A stage's ``depends_on`` of ``()`` makes it a root (a parallel branch from the start); ``None`` means
the previous stage, as in a workflow file.
"""

from __future__ import annotations

__all__ = ["PUBLISHED_SHAPES", "PublishedStage"]

PublishedStage = tuple[str, int, int, float, float, "tuple[str, ...] | None"]
"""``(name, tasks, cores per task, mean runtime s, runtime cv, depends_on)``."""

PUBLISHED_SHAPES: dict[str, tuple[PublishedStage, ...]] = {
    # 1000Genome (wfchef "genome"), 4 chromosomes; runtimes x10.48. individuals || sifting, then the
    # two analyses (mutation_overlap || frequency) each need both branches.
    "1000genome": (
        ("individuals", 28, 1, 970.0, 0.6, ()),
        ("sifting", 4, 1, 60.0, 1.27, ()),
        ("individuals_merge", 4, 1, 1500.0, 0.37, ("individuals",)),
        ("mutation_overlap", 28, 1, 300.0, 1.24, ("individuals_merge", "sifting")),
        ("frequency", 28, 1, 1130.0, 0.4, ("individuals_merge", "sifting")),
    ),
    # CyberShake (Pegasus generator), one site pair; runtimes x19.7. After the synthesis, ZipSeis runs
    # beside the peak-value branch.
    "cybershake": (
        ("ExtractSGT", 2, 1, 2710.0, 1.5, ()),
        ("SeismogramSynthesis", 28, 1, 860.0, 0.71, ("ExtractSGT",)),
        ("ZipSeis", 1, 1, 60.0, 0.0, ("SeismogramSynthesis",)),
        ("PeakValCalcOkaya", 28, 1, 60.0, 1.5, ("SeismogramSynthesis",)),
        ("ZipPSA", 1, 1, 60.0, 0.0, ("PeakValCalcOkaya",)),
    ),
    # Epigenomics, 4 lanes of 7 chunks; runtimes x3.37. A long chain: a slow split, four wide
    # per-chunk stages, then narrow merges.
    "epigenomics": (
        ("fastqSplit", 4, 1, 2960.0, 0.0, None),
        ("filterContams", 28, 1, 60.0, 1.12, None),
        ("sol2sanger", 28, 1, 60.0, 1.15, None),
        ("fast2bfq", 28, 1, 60.0, 1.12, None),
        ("map", 28, 1, 150.0, 0.57, None),
        ("mapMerge", 4, 1, 60.0, 0.78, None),
        ("maqIndex", 1, 1, 150.0, 1.26, None),  # the recipe's "chr21" task type
        ("pileup", 1, 1, 190.0, 0.53, None),
    ),
    # Seismology; runtimes x1993 (the recipe's tasks take seconds). One wide stage, one short merge.
    "seismology": (
        ("sG1IterDecon", 28, 1, 3420.0, 1.28, None),
        ("wrapper_siftSTFByMisfit", 1, 1, 180.0, 0.01, None),
    ),
    # SoyKB, 7 samples, 4 chromosome groups; runtimes x0.87 (its critical path is already an hour).
    # Fourteen stages: a per-sample chain with 4-core alignments, then SNP || indel tails.
    "soykb": (
        ("alignment_to_reference", 7, 4, 100.0, 0.45, None),
        ("sort_sam", 7, 1, 60.0, 0.82, None),
        ("dedup", 7, 1, 120.0, 0.45, None),
        ("add_replace", 7, 1, 60.0, 0.82, None),
        ("realign_target_creator", 7, 1, 230.0, 0.59, None),
        ("indel_realign", 7, 1, 120.0, 0.46, None),
        ("haplotype_caller", 28, 1, 230.0, 0.97, None),
        ("merge_gcvf", 7, 1, 2270.0, 0.01, None),
        ("genotype_gvcfs", 4, 1, 400.0, 0.68, None),
        ("combine_variants", 1, 1, 60.0, 0.03, None),
        ("select_variants_snp", 1, 1, 60.0, 0.0, ("combine_variants",)),
        ("select_variants_indel", 1, 1, 60.0, 0.0, ("combine_variants",)),
        ("filtering_snp", 1, 1, 60.0, 0.01, ("select_variants_snp",)),
        ("filtering_indel", 1, 1, 60.0, 0.06, ("select_variants_indel",)),
    ),
    # SRASearch, 7 runs; runtimes x2.01. The index build runs beside the downloads; 4-core alignments.
    "srasearch": (
        ("bowtie2-build", 1, 1, 60.0, 1.27, ()),
        ("fasterq-dump", 7, 1, 3480.0, 0.95, ()),
        ("bowtie2", 7, 4, 120.0, 0.79, ("bowtie2-build", "fasterq-dump")),
        ("merge", 1, 1, 60.0, 0.98, None),
    ),
    # BWA, 7 chunks; runtimes x5.07. fastq_reduce || bwa_index, then 4-core alignments and two merges.
    "bwa": (
        ("fastq_reduce", 1, 1, 60.0, 0.68, ()),
        ("bwa_index", 1, 1, 2520.0, 0.94, ()),
        ("bwa", 7, 4, 60.0, 1.27, ("fastq_reduce", "bwa_index")),
        ("cat_bwa", 1, 1, 1020.0, 1.12, None),
        ("cat", 1, 1, 60.0, 0.48, None),
    ),
}
"""The published shapes by name: stages in a topological order."""
