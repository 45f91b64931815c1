"""The English templates of every reason code: the one table `TEMPLATES` (calibrate/reasons.py uses it).

Data only, split from reasons.py so that the table can grow (docs/report.md lists every code). Standard
library only, like reasons.py: the statistics import it through reasons.py, and it imports nothing of
calibrate. The templates are marked with `N_` so that `pybabel extract -k N_` puts them in the catalog
(docs/i18n.md, "Reasons").

Over 800 lines because it is one table of data, one entry a code: splitting it would only make a reader look in
two places for a code's wording.
"""

from __future__ import annotations


def N_(message: str) -> str:
    """Mark `message` for translation without translating it (calibrate.i18n.N_; this floor imports nothing)."""
    return message


def ngettext(singular: str, plural: str) -> tuple[str, str]:
    """Mark a template with a singular and a plural form (the `count` figure chooses), without translating it.

    Named after gettext's ngettext so that Babel's default keywords extract the pair; English writes
    both forms the same ("annotator(s)"), so the note does not change; other languages choose.
    """
    return singular, plural


# Figures whose value is itself a word to translate (through WORDS), not data.
WORDS = {"lower": N_("lower"), "upper": N_("upper"), "original": N_("original"), "swapped": N_("swapped"),
         "first": N_("first"), "second": N_("second"),
         # the kinds of names a lookup refuses (lookup.py), singular and plural
         "dataset": N_("dataset"), "datasets": N_("datasets"), "task": N_("task"), "tasks": N_("tasks"),
         "judge": N_("judge"), "judges": N_("judges"), "user": N_("user"), "users": N_("users"),
         "prompt": N_("prompt"), "prompts": N_("prompts"),
         # the kinds of target a label is on (a retired target on the workbench)
         "claim": N_("claim"), "context": N_("context"), "sample": N_("sample"),
         # why a metric run skipped a sample (judges/metrics.skip_reason, runner.py): the keys of a run's `skipped`
         "no claims": N_("no claims"), "no contexts": N_("no contexts"), "no question": N_("no question"), "no answer": N_("no answer"),
         "no ground truth": N_("no ground truth"), "without two responses": N_("without two responses")}
TRANSLATED_FIGURES = ("side", "order", "which", "kind", "plural", "skip")

# code -> English template, filled with str.format from the figures (a pair: singular and plural, by the
# `count` figure). One place: docs/report.md lists them.
TEMPLATES: dict[str, str | tuple[str, str]] = {
    # calibrate.stats: any statistic
    "no_data": N_("no data"),
    "not_finite": N_("the statistic is not finite"),
    "no_rows": N_("no rows"),
    "resamples_undefined": N_("{undefined} of {resamples} resamples undefined and dropped"),
    "one_cluster": N_("only one cluster: the bootstrap cannot estimate sampling variability"),
    "too_few_resamples": N_("fewer than two defined resamples: no interval"),
    "bca_infinite": N_("BCa bias correction is infinite (all resamples on one side of the estimate); percentile "
                       "interval reported"),
    "jackknife_undefined": ngettext("{count} jackknife value(s) undefined and ignored",
                                      "{count} jackknife value(s) undefined and ignored"),
    "bca_out_of_range": N_("BCa adjustment out of range; percentile interval reported"),
    "custom_undefined": N_("the statistic is undefined on the full data"),
    "difference_undefined": N_("{which}: {reason}"),
    "no_rows_four_scores": N_("no rows with all four scores"),
    # agreement
    "no_items_both_raters": N_("no items rated by both raters"),
    "kappa_too_few": N_("n < 2: kappa needs at least two items"),
    "single_label": N_("all labels are {label!r}: expected agreement is 1"),
    "single_label_code": N_("all labels are code {label_code}: expected agreement is 1"),
    "single_label_no_disagreement": N_("all labels are {label!r}: expected disagreement is 0"),
    "single_value_no_disagreement": N_("all pairable values are {label!r}: expected disagreement is 0"),
    "precision_undefined": N_("precision undefined: label never predicted"),
    "recall_undefined": N_("recall undefined: label absent from gold"),
    "no_units_both_raters": N_("no units rated by both {a!r} and {b!r}"),
    "no_ratings": N_("no ratings"),
    "no_item_two_ratings": N_("no item has at least two ratings"),
    "no_values": N_("no values"),
    "no_unit_two_values": N_("no unit has at least two values"),
    # correlation
    "no_pairs_both_scores": N_("no pairs with both scores"),
    "correlation_too_few": N_("n < 2: a correlation needs at least two pairs"),
    "both_constant": N_("x and y are constant"),
    "x_constant": N_("x is constant"),
    "y_constant": N_("y is constant"),
    "no_p_value_two": N_("no p-value for n = 2"),
    "groups_skipped": ngettext("{count} group(s) skipped (n < 2 or constant scores)",
                                 "{count} group(s) skipped (n < 2 or constant scores)"),
    "no_groups": N_("no groups"),
    "no_group_defined": N_("no group has at least two pairs with non-constant x and y"),
    # paired comparisons and McNemar
    "no_pairs_both_values": N_("no pairs with both values"),
    "ttest_too_few": N_("n < 2: the t-test needs at least two pairs"),
    "differences_zero": N_("all differences are zero: the two systems score the same on every pair"),
    "differences_constant": N_("every difference is {difference:.6g}: their standard deviation is 0, so t is undefined"),
    "wilcoxon_few_nonzero": N_("only {count} non-zero differences: the test cannot reach p < 0.05 with fewer than 6"),
    "one_pair_no_interval": N_("n < 2: one pair gives no interval"),
    "differences_same": N_("every difference is the same: the interval is a single point"),
    "baseline_zero": N_("the mean of A is 0: no baseline to be relative to"),
    "no_targets_to_compare": N_("no targets to compare"),
    "no_discordant_pair": N_("the two judges are right and wrong on exactly the same targets: no discordant pair"),
    # presentation order (position bias)
    "unusable_verdicts": N_("unusable verdicts: {original} in the original order, {swapped} in the swapped order"),
    "no_usable_pair": N_("no target has a usable verdict in both orders"),
    "no_targets": N_("no targets"),
    "all_ties": N_("every verdict of the pairs is a tie: no position was picked"),
    # retrieval
    "no_units_to_average": N_("no units to average {what} over"),
    "no_unit_defined": N_("no unit has a defined value"),
    "no_relevant_query": N_("no query has a relevant document"),
    # the alt-test
    "alt_test_too_few_annotators": ngettext("{count} annotator(s) with labels: the alt-test needs at least {min}",
                                              "{count} annotator(s) with labels: the alt-test needs at least {min}"),
    "alt_test_no_item": N_("no item has at least 2 human labels and a judge verdict"),
    "alt_test_min_items": N_("no annotator labelled at least min_items = {min_items} kept items (most: {most})"),
    "alt_test_items_dropped": ngettext("{count} item(s) dropped: fewer than 2 human labels or no judge verdict",
                                         "{count} item(s) dropped: fewer than 2 human labels or no judge verdict"),
    "alt_test_annotators_skipped": ngettext("{count} annotator(s) with fewer than {min_items} kept items not tested: {listed}",
                                              "{count} annotator(s) with fewer than {min_items} kept items not tested: {listed}"),
    "alt_test_annotators_skipped_more": ngettext("{count} annotator(s) with fewer than {min_items} kept items not tested: "
                                           "{listed} and {more} more",
                                                   "{count} annotator(s) with fewer than {min_items} kept items not tested: "
                                           "{listed} and {more} more"),
    "alt_test_constant": N_("annotator {annotator}: every difference is {difference}, so the t statistic is {sign}inf "
                            "and the p-value its limit {p_value:g}"),
    "alt_test_one_item": N_("annotator {annotator}: one item only, the t-test is undefined (not rejected)"),
    "alt_test_few_tested": ngettext("only {count} annotator(s) tested: the winning rate moves in steps of {step:.2g}",
                                      "only {count} annotator(s) tested: the winning rate moves in steps of {step:.2g}"),
    "neg_rmse_overflow": N_("values up to {magnitude:.3g} in magnitude: their squared differences overflow double "
                            "precision (neg_rmse needs values within ±{bound:.3g}); rescale the values"),
    "alt_test_no_verdicts": N_("the judge has no verdicts for this task"),
    "alt_test_pairwise": N_("the alt-test compares labels on single targets; pairwise preferences are not supported"),
    # calibration sections
    "no_shared_targets_judge": N_("no shared targets with the judge"),
    "no_usable_verdicts_on_gold": N_("the judge has no usable verdicts on targets with human gold"),
    "judge_no_verdicts": N_("judge {judge} has no verdicts for this task"),
    "no_two_annotators": N_("no target was labelled by two or more annotators"),
    "kappa_undefined_every_group": N_("kappa is undefined in every group"),
    "no_scored_targets": N_("no scored targets"),
    "no_scale": N_("the task has no scale"),
    "fractional_scores": N_("quadratic weighted kappa needs integer scores; the judge gave fractional ones"),
    "fractional_gold": N_("the gold is fractional (a mean of annotators) and no annotator has enough integer labels"),
    "mean_of_annotators": N_("the gold is a mean of annotators (fractional), so this is the mean of {count} annotators' "
                             "weighted kappa with the judge"),
    "one_order_missing": N_("the judge has {missing}: position bias needs both presentation orders "
                            "(judge run --orders both)"),
    "no_verdicts": N_("no verdicts"),
    "verdicts_in_one_order": N_("verdicts in the {order} order only"),
    "retrieval_source_ids": N_("the samples' retrieved_ids (ranked) and relevant_ids"),
    "retrieval_source_context_relevance_gold": N_(
        "the human gold of context_relevance: each sample's retrieved contexts in rank order, gold 'relevant' as "
        "relevant (a context without gold counts as not relevant); recall is relative to the relevant contexts that "
        "were retrieved, the only ones known"),
    "retrieval_source_context_relevance_judge": N_(
        "the judge's context_relevance verdicts: each sample's retrieved contexts in rank order, verdict 'relevant' "
        "as relevant (no usable verdict counts as not relevant)"),
    "no_gold_derived": N_("no human gold for {task}: it is derived per sample from the {source} labels, and none of "
                          "those samples has any; label {source} or import experts' values with `calibrate import "
                          "labels` (task {task}, a value in 0–1)"),
    "no_gold_metric": N_("no human gold for {task}: annotators do not label it on the item page; import experts' values "
                         "with `calibrate import labels` (task {task}, a value in 0–1)"),
    "more_responses": ngettext("{count} target(s) with more than two responses left out (the statistics are defined for two)",
                                 "{count} target(s) with more than two responses left out (the statistics are defined for two)"),
    "order_no_usable_verdicts": N_("the judge has no usable verdicts on targets with human gold in this order"),
    "neg_rmse_not_numeric": N_("neg_rmse scoring needs numeric labels and verdicts; {task} has labels such as "
                               "{label!r}: use --scoring accuracy"),
    "unexpected": N_("{message}"),
    "no_judge_verdicts": N_("no listed judge has verdicts"),
    "judges_share_no_target": N_("the {count} listed judges share no target with human gold outside their few-shot "
                                 "examples"),
    "no_target_outside_fewshot": N_("no target with human gold outside its few-shot examples"),
    "no_common_target": N_("no common target: see the note above the rows"),
    "retrieval_no_relevant": ngettext("{count} sample(s) without a relevant document are left out of the means",
                                        "{count} sample(s) without a relevant document are left out of the means"),
    "retrieval_none_relevant": N_("no sample has a relevant document: every metric is undefined"),
    # comparing two judges
    "no_common_targets": N_("no common targets"),
    "see_mcnemar": N_("categorical task: see mcnemar"),
    "see_ttest": N_("score task: see ttest and wilcoxon"),
    "imported_judge": N_("{judges} is an imported judge (no prompt version): what changed between the two is not known"),
    "imported_judges": N_("{judges} are imported judges (no prompt version): what changed between the two is not known"),
    # refusals (CalibrateError): lookups
    "unknown_name": N_("unknown {kind} {name!r} ({plural}: {names})"),
    "unknown_name_more": N_("unknown {kind} {name!r} ({plural}: {names}, … ({total} in all))"),
    "unknown_name_none": N_("unknown {kind} {name!r} ({plural}: none yet)"),
    "with_hint": N_("{refusal}: {hint}"),
    "hint_import_samples": N_("import samples first"),
    "hint_import_its_samples": N_("import its samples first"),
    "unknown_version": N_("prompt {prompt} has no version {number} (versions: {numbers})"),
    "unknown_version_none": N_("prompt {prompt} has no version {number} (versions: none)"),
    # refusals: annotation (the workbench, adjudication, guidelines, the team page)
    "adjudication_needs_note": N_("write a note saying why: gold without a reason cannot be audited"),
    "note_too_long": N_("the note is longer than {limit:,} characters"),
    "claim_changed": N_("this claim was changed since the page was loaded (by another edit): reload the page"),
    "claim_has_others_labels": ngettext("claim {numbers} carries labels of {count} other annotator(s): changing it would "
                                        "make their work stale; flag the item for an engineer instead (Shift+F)",
                                        "claim {numbers} carries labels of {count} other annotator(s): changing it would "
                                        "make their work stale; flag the item for an engineer instead (Shift+F)"),
    "claims_have_others_labels": ngettext("claims {numbers} carry labels of {count} other annotator(s): changing them would "
                                          "make their work stale; flag the item for an engineer instead (Shift+F)",
                                          "claims {numbers} carry labels of {count} other annotator(s): changing them would "
                                          "make their work stale; flag the item for an engineer instead (Shift+F)"),
    "claim_needs_text": N_("a claim needs text"),
    "claim_too_long": N_("a claim has at most {limit:,} characters"),
    "split_inside": N_("split inside the claim: put the caret between its first and last character (1–{last})"),
    "split_between_words": N_("split between two words: both parts need text"),
    "merge_last_claim": N_("claim {number} is the last one: there is no next claim to merge it with"),
    "undo_changed_again": N_("cannot undo: these claims were changed again since (by another edit)"),
    "guideline_empty": N_("the guideline is empty: write what annotators should do"),
    "guideline_too_long": N_("the guideline is longer than {limit:,} characters"),
    "guideline_unchanged": N_("nothing changed: this is already version {version}"),
    "pairwise_fewer_than_two": N_("task {task} compares responses, and this item has fewer than two"),
    "rationale_too_long": N_("the rationale is longer than {limit:,} characters"),
    "evidence_on_claims": N_("evidence is marked on claims"),
    "no_such_context": N_("this item has no context #{number}"),
    "label_first": N_("choose a label first; the rationale and evidence are saved with it"),
    "error_type_no_types": N_("task {task} has no error types (task edit {task} --error-types X,Y sets them)"),
    "error_type_unknown": N_("error type {error_type!r} is not one of task {task}'s: {listed}"),
    "error_type_not_negative": N_("an error type goes with the label {negative}, not {value}"),
    "say_why_skip": N_("say why: the reason for skipping"),
    "say_why_flag": N_("say why: what should be looked at"),
    "own_account": N_("you cannot deactivate your own account"),
    # refusals: calibrate queue auto (annotation/auto_queue.py)
    "auto_daily_range": N_("the daily budget must be a whole number from 1 to {limit:,}, not {value}"),
    "auto_needs_experts": N_("name at least one expert to assign (--assign)"),
    "auto_expert_inactive": N_("expert {user} is deactivated"),
    "auto_overlap_experts": N_("an overlap of {overlap} needs at least {overlap} experts to assign (given: {given})"),
    "auto_share_range": N_("{name} must lie between 0 and 1, not {value}"),
    # production (loop/production.py): `calibrate monitor`, the Production page, `gate --production`
    "no_calibration_figure": N_("no calibration-time agreement: the judge has no verdicts on labels outside the production "
                                "streams; to get one, run the same judge version on a labelled dataset (its expert "
                                "labels outside the production queues)"),
    "no_complete_window": N_("no complete window yet: every window is still open or not fully judged"),
    "judge_pass_failed_latest": N_("the latest judge pass failed (run {run}: {error}); window {window} was judged before it"),
    "window_incomplete": N_("window {window} has ended but is not complete: {unjudged} of its {sampled} samples have no verdict "
                            "yet ({failed} failed calls are counted as judged){run}; the gate does not pass on an earlier "
                            "window (the last complete one, {earlier}, was {earlier_status})"),
    "monitor_needs_task": N_("judge {judge} has verdicts on {dataset} for tasks: {tasks}; name one with --task"),
    # A/B comparisons (calibrate ab): the `notes` list
    "relative_undefined": N_("relative improvement undefined: {reason}"),
    "ab_no_value": ngettext("{count} sample(s) of {by}={value} have no value for the metric (no labels or verdicts, or "
                            "no relevant document) and are left out",
                            "{count} sample(s) of {by}={value} have no value for the metric (no labels or verdicts, or "
                            "no relevant document) and are left out"),
    "ab_repeated": ngettext("{count} question(s) have several samples in {by}={value}: their values are averaged",
                           "{count} question(s) have several samples in {by}={value}: their values are averaged"),
    "ab_unpaired": ngettext("{count} question(s) have a value only in {by}={value}: unpaired, left out of the tests",
                           "{count} question(s) have a value only in {by}={value}: unpaired, left out of the tests"),
    # refusals: calibration pages
    "compare_same_judge": N_("compare two different judges"),
    "no_test_split": N_("{dataset} has no test split (splits: {splits})"),
    "no_test_split_none": N_("{dataset} has no test split (splits: none)"),
    "no_test_verdicts": N_("judge {judge} has no {task} verdicts in the test split of {dataset}: run it there first"),
    "unknown_order_rule": N_("order_rule must be one of {rules}, not {value!r}"),
    # decisions and labels needed
    "outside_interval": N_("the estimate lies outside its interval: no extrapolation is made"),
    "no_interval": N_("there is no confidence interval to extrapolate from"),
    "straddles": N_("the CI [{low:.3f}, {high:.3f}] straddles {threshold:g}; about {more} more labelled targets "
                    "(n ≈ {total}) would be expected to settle it, assuming the estimate stays at {value:.3f} and the "
                    "distance to the CI's {side} bound ({half:.3f}) shrinks as 1/√n"),
    "alignment_undefined": N_("the alignment statistic is undefined: no decision"),
    "no_ci_point": N_("no confidence interval: decided on the point estimate alone (rule: point)"),
    "no_ci_ci_lower": N_("no confidence interval, so its lower bound cannot be checked against the threshold (rule: ci_lower)"),
    "too_close": N_("the estimate {value:.3f} is too close to the threshold {threshold} for more labels to settle it in "
                    "practice (it would take over {limit} labelled targets)"),
    "straddles_half_width": N_("the CI [{low:.3f}, {high:.3f}] straddles {threshold}; about {more} more labelled targets "
                               "(n ≈ {total}) would be expected to settle it, assuming the estimate stays at {value:.3f} "
                               "and the CI half-width shrinks as 1/√n"),
    "on_threshold": N_("the estimate sits on the threshold: no number of labels is expected to settle it"),
    "half_width_reached": N_("the CI half-width {half:.3f} is already within {target:g}"),
    "half_width": N_("the CI half-width is {half:.3f} with n = {n}; about {more} more labelled targets (n ≈ {total}) "
                     "would be expected to bring it under {target:g}, assuming it shrinks as 1/√n"),
    "half_width_judge_more": N_("the CI half-width is {half:.3f} with n = {n}; about {more} more labelled targets "
                                "(n ≈ {total}) would be expected to bring it under {target:g}, assuming it shrinks as "
                                "1/√n; only {candidates} judged targets lack gold, so the judge must also judge "
                                "{judge_more} more targets"),
    # estimating the live mean (stats/estimation.py, stats/consistency.py, calibration/estimate.py)
    "no_labels": N_("no labelled targets (no target has both a gold value and a verdict)"),
    "no_target_verdict": N_("no target has a verdict"),
    "no_unlabelled": N_("no unlabelled targets (every target with a verdict is labelled)"),
    "too_few_labels": N_("fewer than two labelled targets: no standard error"),
    "too_few_audit": N_("too few audit labels where the traffic is: traces kept with probability {inclusion_prob:g} carry "
                        "{share:.1%} of the window's traffic and have {have} labelled samples (at least {need} needed); about "
                        "{more} more audit labels would settle it"),
    "level_not_for_task": N_("--level {level} does not apply to {task} (its levels: {levels})"),
    "positive_not_for_scores": N_("--positive is for tasks with labels; {task} is {kind} (its mean score is estimated)"),
    "answers_need_labels": N_("the answers level needs a task with labels: {task} scores each claim (use --level claims)"),
    "needs_positive": N_("task {task} needs --positive LABEL (the label whose share is estimated)"),
    "unknown_positive": N_("--positive {positive!r} is not a label of {task} (labels: {labels})"),
    "inclusion_prob_stored": N_("sample {sample}: metadata.inclusion_prob must lie in [{floor:g}, 1], not {value}"),
    "zero_variance": N_("the audit's gold and the judge's errors do not vary: the interval would be a point"),
    "constant_gold": N_("every labelled target has the same gold value: the spread of the gold, and so the interval, "
                        "is unknown"),
    "no_gold_positive": N_("no labelled target is positive: the judge's sensitivity is unknown"),
    "no_gold_negative": N_("no labelled target is negative: the judge's specificity is unknown"),
    "not_better_than_chance": N_("the judge's sensitivity + specificity is at most 1: its verdicts carry no usable signal"),
    "width_unreachable": N_("even labelling every target would not reach the target width"),
    "too_few_runs": N_("no target has two or more verdicts from repeated runs"),
    "judge_only": N_("the judge's verdicts alone: biased by its errors, whatever the number of verdicts"),
    "constant_verdicts": N_("the verdicts do not vary: they carry no information, lambda = 0 (the labels alone)"),
    "rogan_gladen_weighted": N_("rogan-gladen is unweighted: on a dataset whose samples or audit labels carry unequal "
                                "weights it would estimate the samples, not the traffic (use ppi++)"),
    "not_binary": N_("rogan-gladen needs a binary estimand: a task with labels (the positive label's share)"),
    "estimate_refused": N_("no {method} estimate of {task} on {dataset} with {judge}: {reason} [{refusal}] ({labelled} "
                           "labelled, {unlabelled} unlabelled, {fewshot} few-shot left out)"),
    # drift of the golden set against production (stats/drift.py) and its refresh (stats/refresh.py)
    "empty_sample": N_("the golden or the production sample has no values"),
    "one_category": N_("every value of both samples is in one category: there is no share to shift ({label!r})"),
    "mde_one_category": N_("the golden sample has a single category: no shift of its share can be formed"),
    "mde_unreachable": N_("even removing the largest category entirely would not be detected with the asked power"),
    "constant_values": N_("every value of both samples is the same (all {value:g})"),
    "zero_spread": N_("the golden sample's IQR and standard deviation are 0: the distance cannot be normalised"),
    "too_few_texts": N_("a sample has fewer texts than cross-validation folds ({fewest} < {folds})"),
    "no_text_features": N_("the texts have no character n-grams"),
    "kappa_undefined": N_("kappa is undefined on the golden or on the audit labels"),
    "no_positives": N_("a sample has no human-positive item: sensitivity is undefined"),
    "no_negatives": N_("a sample has no human-negative item: specificity is undefined"),
    "permutation_tv": N_("expected counts below {min_expected:g} even after pooling: permutation test on total variation"),
    "interval_spans_zero": N_("inconclusive: the interval spans 0"),
    "refresh_seats_moved": N_("some strata had too few eligible production items: their seats went to the others"),
    # refusals: golden sets (calibrate/loop/golden.py)
    # what to add or enable when traces are skipped for a reason (ingest/traces/mapping.py, HINTS)
    "trace_skip_no_root_span": N_(
        "the trace's root span never arrived: export every span of a trace (check sampling upstream)"),
    "trace_skip_unknown_convention": N_(
        "instrument with OpenInference (openinference-instrumentation-*) or the OpenTelemetry GenAI "
        "conventions, or export from Langfuse"),
    "trace_skip_content_not_captured": N_(
        "GenAI instrumentations record no message content by default: set "
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true"),
    "trace_skip_no_question": N_(
        "the root CHAIN/AGENT span needs input.value (OpenInference: unset OPENINFERENCE_HIDE_INPUTS)"),
    "trace_skip_no_answer": N_(
        "the root CHAIN/AGENT span needs output.value (OpenInference: unset OPENINFERENCE_HIDE_OUTPUTS)"),
    "trace_skip_no_contexts": N_(
        "no retrieved document text: add a RETRIEVER span with retrieval.documents.N.document.content "
        "(OpenInference; an LLM instrumentation alone records none), or gen_ai.retrieval.documents with "
        "content"),
    "trace_skip_over_max": N_(
        "more traces were sampled than --max allows (thumbs-down first, then the smallest draws were "
        "kept)"),
    "trace_skip_invalid": N_(
        "a text the samples import refuses (an unpaired surrogate escape, a document id over 500 "
        "characters, metadata over IMPORT_MAX_FIELD_CHARS)"),
    "trace_skip_too_long": N_("a question, answer or context is over IMPORT_MAX_FIELD_CHARS characters"),
    "trace_skip_unmappable": N_("the trace's spans could not be mapped (the import names each such trace and why)"),
    "trace_skip_quarantined": N_(
        "settling could not map the trace: it was kept aside with its reason (the dataset page) and "
        "dropped a day after its last span"),
    "trace_skip_inclusion_prob_below_min": N_(
        "the upstream sampling probability (tracestate th) times the rate is below 1e-06: raise the "
        "Collector's sampling_percentage or the token's --rate"),
    # options an estimate or `calibrate monitor` refuses (calibration/estimate.py, production.py)
    "option_method": N_("method must be one of {methods}, not {method!r}"),
    "option_by_window": N_("by-window must be one of {windows}, not {value!r}"),
    "option_target_width": N_("target-width must lie in [1e-06, 1], not {value!r}"),
    "option_alpha": N_("alpha must lie in [1e-06, 0.5], not {value!r}"),
    "option_finite": N_("--{name} must be a finite number, not {value!r}"),
    "prices_not_a_table": N_("{path}: not a price table ({error}); see docs/judges.md"),
    "feedback_too_many": N_("{count:,} feedback records, the limit is {limit:,} per request (TRACES_MAX_FEEDBACK): "
                            "send them in several requests"),
    "traces_unknown_token": N_("unknown token id {token_id} (tokens: {ids})"),
    "traces_no_tokens": N_("unknown token id {token_id} (tokens: none yet)"),
    "golden_ref_shape": N_("golden set {ref!r}: write NAME or NAME@VERSION (a version is a positive integer)"),
    "golden_name_invalid": N_("golden set name {name!r}: one line of at most {limit} characters, without '@'"),
    # a WHERE expression (calibrate/where.py; docs/cli.md, "WHERE expressions")
    "where_length": N_("{option}: a WHERE expression is 1 to {limit:,} characters, got {length:,}"),
    "where_terms": N_("{option}: at most {limit} terms joined by &, got {count:,}"),
    "where_empty_term": N_("{option}: an empty WHERE term (write a term on each side of every &)"),
    "where_unknown": N_("WHERE term {term!r} in {option}: not a term; use split=NAME, metadata.FIELD=VALUE, last=Nd, "
                        "started_at>=DATE, stream=audit|triage, labelled or unlabelled, joined by &"),
    "where_field": N_("{option} must be metadata.FIELD=VALUE, got {term!r}: {name!r} is not a WHERE term (a metadata "
                      "field is written metadata.{name})"),
    "where_flag": N_("WHERE term {term!r} in {option}: {name} takes no value"),
    "where_operator": N_("WHERE term {term!r} in {option}: {name} takes =; only started_at compares with <, <=, > or >="),
    "where_split": N_("WHERE term {term!r} in {option}: split= needs a split's name"),
    "where_last": N_("WHERE term {term!r} in {option}: write last=Nd, 1d to {limit:,}d"),
    "where_stream": N_("WHERE term {term!r} in {option}: the stream is audit or triage"),
    "where_metadata": N_("WHERE term {term!r} in {option}: write metadata.FIELD=VALUE with a value and a field of at "
                         "most {limit} characters (a dotted path into nested objects; no \" and no empty part)"),
    "where_started_at": N_("WHERE term {term!r} in {option}: write started_at>=DATE (or >, <=, <) with an ISO 8601 date "
                           "or date-time from 1970 to 2199, e.g. started_at>=2026-12-01"),
    "where_none": N_("no sample of {dataset} has {where}"),
    "golden_unknown": N_("dataset {dataset} has no golden set {name!r} (golden sets: {names})"),
    "golden_no_version": N_("golden set {name} has no version {version} (latest: {latest})"),
    "golden_exists": N_("dataset {dataset} already has a golden set {name!r}: refresh it to make a new version"),
    "golden_no_selection": N_("say which samples: --split NAME or --where WHERE"),
    "golden_no_splits": N_("dataset {dataset} has no splits (production traces have none), so --split {split} matches "
                           "nothing: choose with --where, e.g. --where metadata.topic=VALUE, or give neither for every "
                           "sample"),
    "golden_queue_why": ngettext(
        "{count} new item(s), {per_item} experts each so that their agreement is measured: {assignments} "
        "assignment(s) queued to {experts}", "{count} new item(s), {per_item} experts each so that their agreement is "
        "measured: {assignments} assignment(s) queued to {experts}"),
    "golden_queue_already": N_("{already} assignments the new items already had were kept, so fewer were added"),
    "golden_queue_open": N_("{experts_available} active annotators, fewer than {per_item}: {open_slots} open slots "
                            "that any annotator may claim"),
    "golden_nothing_chosen": N_("no sample of {dataset} matches {selection}"),
    "golden_fewshot_members": ngettext("{count} chosen sample(s) are few-shot examples of a prompt version and cannot "
                                       "be golden ({samples})",
                                       "{count} chosen sample(s) are few-shot examples of a prompt version and cannot "
                                       "be golden ({samples})"),
    "golden_status_options": N_("--max-age must be at least 1 day and --min-renewal between 0 and 1"),
    "golden_refresh_options": N_("--renew must be in (0, 1] and --anchor-share in [0, 1), got {renew:g} and "
                                 "{anchor_share:g}"),
    "golden_strata_field": N_("field {field!r}: use metadata.FIELD"),
    "golden_refresh_impossible": N_("cannot refresh: {detail}"),
    "golden_task_categorical": N_("the judge's drift needs a categorical task; {task} is not one (use --task)"),
    "fewshot_golden": N_("few-shot {ref}: the sample is in golden set {golden}, which evaluates the judge"),
    "capped_to_dataset": N_("about {wanted} more labelled targets would be needed, but the dataset has {available} "
                            "targets of this kind, {left} of them not yet counted in n = {n}: labelling all of them is "
                            "not expected to be enough"),
    # refusals: tasks (calibrate/tasks.py: the Tasks page, and a label's value on the workbench)
    "scale_shape": N_("scale must look like 1-5, got {given!r}"),
    "scale_order": N_("scale must go from low to high, got {given!r}"),
    "scale_magnitude": N_("scale must stay within ±{limit:.0e}, got {given!r}"),
    "description_too_long": N_("the description has {count:,} characters: at most {limit:,}"),
    "label_too_long": N_("{option}: label {label!r} has {count:,} characters: at most {limit}"),
    "too_many_labels": N_("{option}: a task has at most {limit} labels, this would make {count}"),
    "builtin_labels_fixed": N_("task {task} is built in: its labels and scale are fixed (reports and metrics rely on them)"),
    "add_labels_score_task": N_("--add-labels is for categorical and pairwise tasks; {task} is {kind} (use --scale)"),
    "add_labels_response_id_long": N_("--add-labels: a response id is at most {limit} characters"),
    "label_exists": N_("task {task} already has the label {label!r} (labels: {labels})"),
    "add_labels_duplicates": N_("--add-labels has duplicates: {labels}"),
    "scale_label_task": N_("--scale is for ordinal and continuous tasks; {task} is {kind} (use --add-labels)"),
    "scale_leaves_out": N_("scale {low:g}-{high:g} would leave out stored values of {task} (they range from "
                           "{stored_low:g} to {stored_high:g})"),
    "display_score_task": N_("--display names labels: {task} is {kind} (its values are numbers)"),
    "display_no_label": N_("--display: task {task} has no label {label!r} (labels: {labels})"),
    "display_name_shape": N_("--display: the name of {label!r} must be one line of at most {limit} characters"),
    "builtin_not_removable": N_("task {task} is built in: it cannot be removed"),
    "value_missing": N_("value is missing"),
    "value_not_a_label": N_("value {value!r} is not a label of task {task} ({labels})"),
    "value_not_a_number": N_("value must be a number for task {task}, got {value!r}"),
    "value_outside_scale": N_("value {value} is outside the scale of task {task} ({low}–{high})"),
    "value_beyond_magnitude": N_("value {value:.3g} of task {task} is beyond ±{limit:.0e}, the largest value calibrate "
                                 "takes (give the task a --scale, or rescale the values)"),
    # refusals: accounts (calibrate/accounts.py: the team page, the Account page) and a dataset's split
    "username_invalid": N_("username {username!r} is not valid: use letters, digits, '.', '_', '@' or '-' (at most 100), "
                           "starting with a letter or digit"),
    "password_too_short": N_("password must have at least {limit} characters"),
    "role_unknown": N_("role must be one of {roles}; got {role!r}"),
    "user_exists": N_("user {username!r} already exists (set its password with `calibrate users password {username}`)"),
    "language_unknown": N_("language must be one of {locales}"),
    "split_empty": N_("no sample of {dataset} is in split {split!r} (splits: {splits})"),
    "split_empty_none": N_("no sample of {dataset} is in split {split!r} (splits: none)"),
    # refusals: the prompt editor (calibrate/judges/versions.py: parameters, few-shot examples, the template)
    "param_shape": N_("parameter must be key=value, got {pair!r}"),
    "fewshot_twice": N_("few-shot {ref}: given twice"),
    "fewshot_not_index": N_("few-shot {ref}: {position!r} is not a 0-based index"),
    "fewshot_no_sample": N_("few-shot {ref}: no sample {sample!r}"),
    "fewshot_no_sample_in": N_("few-shot {ref}: no sample {sample!r} in dataset {dataset}"),
    "fewshot_several_datasets": N_("few-shot {ref}: sample {sample!r} exists in several datasets ({datasets}): name the "
                                   "dataset"),
    "fewshot_test_split": N_("few-shot {ref}: the sample is in the test split, which is never shown to a judge"),
    "fewshot_no_claim": N_("few-shot {ref}: sample {sample} has no claim {position}"),
    "fewshot_no_context": N_("few-shot {ref}: sample {sample} has no context {position}"),
    "fewshot_claims_not_corrected": N_("few-shot {ref}: its claims ({source}) were not corrected by an expert; split, merge "
                                       "or edit them in the workbench first"),
    "fewshot_no_claims": N_("few-shot {ref}: the sample has no claims"),
    "template_empty": N_("template: empty"),
    # the human ceiling (calibration/sections.py, human.ceiling): which figure and why
    "ceiling_pairwise": ngettext("every annotator pair shares at least {min_shared} targets: the mean of {count} "
                                 "pairwise {stat}", "every annotator pair shares at least {min_shared} targets: the "
                                 "mean of {count} pairwise {stat}"),
    "ceiling_pooled": ngettext("{count} of {pairs} annotator pairs share fewer than {min_shared} targets: "
                               "Krippendorff's α ({level}) pooled over every target labelled by two or more",
                               "{count} of {pairs} annotator pairs share fewer than {min_shared} targets: "
                               "Krippendorff's α ({level}) pooled over every target labelled by two or more"),
    "ceiling_pooled_undefined_pairs": N_("no annotator pair has a defined {stat}: Krippendorff's α ({level}) pooled "
                                         "over every target labelled by two or more"),
    # tasks and prompts scoped to datasets (calibrate/tasks.py, calibrate/judges/versions.py): refusals
    "task_not_on_dataset": N_("task {task} is scoped to {datasets}: it is not labelled or judged on {dataset}"),
    "prompt_not_on_dataset": N_("prompt {prompt} is scoped to {datasets}: it does not run on {dataset}"),
    "prompt_outside_task_scope": N_("task {task} is scoped to {datasets}: a prompt of it cannot be scoped to {dataset}"),
    "task_scope_builtin": N_("task {task} is built in: it stays global (every dataset)"),
    "task_scope_orphans": N_("task {task} has {uses} on dataset {dataset}: it cannot be scoped away from {dataset} (name "
                             "{dataset} among its datasets)"),
    "prompt_scope_fixed": N_("prompt {prompt} is scoped to {datasets}: --dataset {dataset} is not one of them (a prompt's "
                             "datasets are set when it is created)"),
    # the calibration dashboard's splits (calibrate/loop/dashboard.py, testsplit.py): why a split shows nothing
    "dashboard_no_split": N_("{dataset} has no sample in split {split!r} (splits: {splits})"),
    "dashboard_no_split_none": N_("{dataset} has no sample in split {split!r} (splits: none; view all samples, or assign "
                                  "splits with calibrate sample --split)"),
    "dashboard_no_labels_split": N_("no {task} labels in split {split} of {dataset}: label some targets first or choose "
                                    "another split"),
    "dashboard_no_labels": N_("no {task} labels on any sample of {dataset}: label some targets first"),
    "dashboard_no_judges": N_("no judge has {task} verdicts on {dataset} yet: create a prompt version and run it, or "
                              "import a judge's verdicts"),
    "test_split_frozen": N_("the test split of {dataset} is frozen: its scores are computed only on demand, one judge at "
                            "a time, with “Evaluate on test” (each look is recorded)"),
    "all_samples_include_test": N_("all samples of {dataset} include the frozen test split: choose another split "
                                   "({splits})"),
    "unsplit_labelled": ngettext("{count} labelled sample(s) of {dataset} without a split (calibrate sample --split "
                                 "splits only the samples it takes): no split shows them. To split the rest, run "
                                 "calibrate sample --dataset {dataset} --fraction 1 --split SPEC with the fractions you "
                                 "used (splits already given are kept; it also queues every sample for annotation)",
                                 "{count} labelled sample(s) of {dataset} without a split (calibrate sample --split "
                                 "splits only the samples it takes): no split shows them. To split the rest, run "
                                 "calibrate sample --dataset {dataset} --fraction 1 --split SPEC with the fractions you "
                                 "used (splits already given are kept; it also queues every sample for annotation)"),
    # refusals: judge runs (calibrate/judges/: the Run button, the runs page; the baseline, metric and embeddings options)
    "backend_unknown": N_("backend must be one of {backends}; got {backend!r}"),
    "run_model_differs": N_("version uses model {model!r}; save a new version to use {model2!r}"),
    "run_no_model": N_("no model: the version has none, give --model"),
    "base_url_scheme": N_("--base-url must start with http:// or https://, got {base_url!r}"),
    "concurrency_too_low": N_("--concurrency must be at least 1"),
    "run_split_unknown": N_("--split must be train, dev or test; got {split!r}"),
    "orders_not_pairwise": N_("--orders is for pairwise tasks; {task} is {kind_}"),
    "orders_unknown": N_("--orders must be one of {orders}; got {orders2!r}"),
    "nothing_to_do_kept": N_("nothing to do: all {kept} answers in scope keep their claims, which carry expert labels or corrections "
                             "(--force re-extracts them, flagging those labels stale)"),
    "nothing_to_judge": N_("no {target} of dataset {dataset} to judge for task {task} with these options"),
    "nothing_to_do_extracted": N_("nothing to do: all {count} answers already carry the claims of {name}"),
    "nothing_to_do_judged": N_("nothing to do: all {count} targets already have verdicts of {name} (--rerun judges them again, "
                               "answered from the cache)"),
    "no_such_run": N_("no run {run_id}"),
    "no_sample_two_responses": N_("no sample of {dataset} has two or more responses to compare for {task}"),
    "samples_range": N_("--samples must be an integer from 1 to {max_samples}, not {samples!r}"),
    "samples_metric_task": N_("--samples is for judges of a label or score task; {task} is a metric"),
    "samples_extraction_task": N_("--samples is for judges of a label or score task; {task} is the claim extraction"),
    "nothing_to_measure": N_("nothing to measure for {task} in {dataset}: {value}"),
    "skipped_nothing_to_measure": N_("skipped {total} samples with nothing to measure (no verdict): {counts}"),
    "skipped_count": N_("{count} {skip}"),
    "watch_metric_tfidf_embedder": N_("{ref} scores {task} with the TF-IDF embedder, fitted on the samples judged together: "
                                      "a watcher judges whatever it claimed, so its scores would not equal `judge run`'s; "
                                      "give the version embedder=http and an embedding_model, or run it with `calibrate judge run`"),
    "watch_metric_embedding_guard": N_("{ref}'s leakage guard (embedding) is fitted on the samples judged together: a watcher "
                                       "judges whatever it claimed, so its scores would not equal `judge run`'s; use "
                                       "leakage_guard=lexical or off, or run it with `calibrate judge run`"),
    "watch_metric_baseline_relevance": N_("the baseline's context relevance for {ref} ({task}) is fitted on the samples judged "
                                          "together: a watcher judges whatever it claimed, so its scores would not equal "
                                          "`judge run`'s; watch it with an LLM backend, or run it with `calibrate judge run`"),
    "judge_name_taken": N_("a judge named {name} already exists and is not a run of this version (imported verdicts?)"),
    "run_in_progress": N_("run {run_id} of {name} is still in progress; wait for it or stop it first"),
    "baseline_unknown_params": N_("unknown baseline parameter(s): {listed} (known: {listed2})"),
    "baseline_bad_param": N_("bad baseline parameter: {exc}"),
    "baseline_task_unknown": N_("the baseline judge knows {tasks} and pairwise tasks; task {task} needs an LLM backend"),
    "n_questions_range": N_("n_questions must be a whole number from 1 to {max_n_questions}, got {value!r}"),
    "embedder_unknown": N_("embedder must be tfidf or http, got {choice!r}"),
    "answer_relevancy_no_embeddings": N_("the {backend} backend has no embeddings endpoint: answer_relevancy needs embedder=tfidf "
                                         "(offline) there, or an OpenAI-compatible server"),
    "answer_relevancy_needs_model": N_("answer_relevancy needs embedding_model=NAME in the version's params (an OpenAI-compatible "
                                       "/embeddings model), or embedder=tfidf to embed offline"),
    "leakage_guard_unknown": N_("leakage_guard must be one of {leakage_guards}, got {mode!r}"),
    "leakage_threshold_needs_guard": N_("leakage_threshold needs leakage_guard=lexical or embedding"),
    "leakage_guard_wrong_metric": N_("leakage_guard is an option of context_recall, not of {metric}"),
    "leakage_threshold_range": N_("leakage_threshold must be a number from 0 to 1, got {threshold!r}"),
    "extract_wrong_task": N_("{ref} is a prompt of task {task}: claims extract needs a prompt of task claim_extraction"),
    "run_extraction_prompt": N_("{ref} extracts claims: run it with `calibrate claims extract` (or the dataset page's button)"),
    "embeddings_no_endpoint": N_("the {backend} backend has no embeddings endpoint: use embedder=tfidf (offline) or an "
                                 "OpenAI-compatible embeddings server"),
    "embeddings_needs_model": N_("an embeddings endpoint needs a model name (embedding_model)"),
    "api_key_missing": N_("the environment variable {api_key_env} (--api-key-env) is not set or empty"),
    "nothing_to_do_extracted_kept": N_("nothing to do: all {count} answers already carry the claims of {name}; {kept} kept their "
                                       "claims, which carry expert labels or corrections (--force re-extracts them)"),
    # refusals: the prompt editor (judges/versions.py, params.py, render.py: a prompt's name, parameters, few-shot and template)
    "param_number_range": N_("must be a number from {low:g} to {high:g}"),
    "param_whole_range": N_("must be a whole number from {low:,} to {high:,}"),
    "param_exactly": N_("must be {value}"),
    "param_stops_single": N_("must be a string or a list of 1 to {count} strings of at most {chars} characters"),
    "param_stops": N_("must be a list of 1 to {count} strings of at most {chars} characters"),
    "param_response_format": N_('must be an object with "type" text, json_object or json_schema'),
    "param_plain_json": N_("must be plain JSON"),
    "param_json_too_long": N_("must be at most {limit:,} characters of JSON"),
    "param_choice": N_("must be one of {options}"),
    "param_model_name": N_("must be a model name of at most {limit} characters"),
    "params_value": N_("params: {name} {problem}, got {value}"),
    "params_value_on": N_("params: {name} {problem} on the {backend} backend, got {value}"),
    "params_not_object": N_("params must be an object of key=value pairs"),
    "params_unknown_saved": N_("params: '{unknown}' is not a parameter calibrate sends (see docs/judges.md); save a version without it"),
    "params_reserved": N_("params: '{key}' is set by calibrate, not a parameter"),
    "params_backend_refuses": N_("params: the {backend} backend does not take '{key}' ({takers} only); save a version without it"),
    "params_not_boolean": N_("params: {key} must be true or false, got {value}"),
    "params_baseline": N_("params: {exc}"),
    "params_metric_value": N_("params: {key} {problem}, got {value}"),
    "params_unknown": N_("params: '{key}' is not a parameter calibrate sends (allowed: {allowed}; see docs/judges.md)"),
    "prompt_ref_shape": N_("give a prompt as NAME@VERSION, got {text!r}"),
    "prompt_ref_version": N_("version must be a positive number in {text!r} (NAME@VERSION)"),
    "fewshot_needs_position": N_("few-shot {ref}: task {task} judges {target}s: write SAMPLE:N with the 0-based {what}"),
    "fewshot_no_gold": N_("few-shot {ref}: no human gold label for this target ({rationale})"),
    "prompt_name_invalid": N_("prompt name must be letters, digits, '_', '-' or '.', at most 64, no '@'; got {name!r}"),
    "fewshot_metric_task": N_("few-shot examples are not supported for the metric task {task_row}: its calls judge single claims, "
                              "contexts or statements, which have no gold of that task to show; write examples into the template text "
                              "instead"),
    "prompt_new_needs_task": N_("prompt {name!r} is new: give its task"),
    "prompt_other_task": N_("prompt {name} judges task {task_row}, not {task}"),
    "template_known_fields": N_(" (known: {known})"),
    "claim_index": N_("claim index"),
    "context_rank": N_("context rank"),
    "gold_nobody_labelled": N_("nobody labelled it"),
    "gold_disagree": N_("the annotators disagree ({values}) and nobody adjudicated"),
    "template_too_long": N_("{part}: longer than {max_template_chars} characters"),
    "template_unknown_field": N_("{part}: line {lineno}: unknown field '{field}'{detail} (fields: {names})"),
    "template_syntax": N_("{part}: line {lineno}: {message}"),
    "template_nested_parse": N_("{part}: nested too deeply to parse (brackets or blocks inside one another)"),
    "template_refused": N_("{part}: {exc}"),
    "template_fails": N_("{part}: fails to render: {name}: {exc}"),
    "template_nested_depth": N_("{part}: line {lineno}: brackets or blocks nested more than {max_parse_depth} deep"),
    "system_item_field": N_("system: line {lineno}: '{node}' is an item field; the system text must be the same for every item (so "
                            "providers can cache it): use it in the template"),
    # the prompt editor's trial renders, bounded per user and in all (judges/render_pool.py: Busy, HTTP 429 / 503)
    "trials_per_user": N_("you have {limit} trial render(s) running already (PROMPT_TRIALS_PER_USER): try again in "
                          "{seconds} s"),
    "trials_total": N_("{limit} trial renders are running already (PROMPT_TRIALS_TOTAL): try again in {seconds} s"),
    "render_workers_busy": N_("every render worker is busy ({workers}, PROMPT_RENDER_WORKERS): try again in {seconds} s"),
    # the template sandbox's limits (judges/sandbox.py: RenderError, the prompt editor's trial render, a run item's error)
    "render_too_slow": N_("rendering took longer than the {seconds:g} s limit (PROMPT_RENDER_SECONDS)"),
    "render_work": N_("{what} would build {chars:,} characters, and a render may build {work:,} ({factor} × PROMPT_RENDER_MAX_CHARS)"),
    "render_work_already": N_("{what} would build {chars:,} characters; this render already built {spent:,}, and a render may build "
                              "{work:,} ({factor} × PROMPT_RENDER_MAX_CHARS)"),
    "render_too_long": N_("the rendered text is longer than the {limit:,}-character limit (PROMPT_RENDER_MAX_CHARS)"),
    "render_unbounded": N_("template code ran outside a bounded render"), "render_refused": N_("{part} refused: {refusal}"),
    "render_recursion": N_("{part} refused: it recurses too deeply (a macro that calls itself without end?)"),
    "render_memory": N_("{part} refused: it ran out of memory"), "render_int_bits": N_("{what} makes a number of more than {bits:,} bits"),
    "render_power_bits": N_("{left} ** {right} makes a number of more than {bits:,} bits"),
    "render_star_width": N_("'%*' widths are not allowed in templates; write the width as a number"),
    "render_range": N_("range() of {count:,} numbers; a template may ask for at most {limit:,}"),
    "render_prints": N_("{what} builds a value that would print as more than {limit:,} characters ({factor} × PROMPT_RENDER_MAX_CHARS)"),
    "render_nested": N_("{what} builds a value nested more than {depth:,} levels deep (PROMPT_RENDER_MAX_DEPTH)"),
    "render_filter_chars": N_("|{name} on {count:,} characters; this filter takes at most {limit:,} (PROMPT_RENDER_MAX_CHARS)"),
    "render_filter_elements": N_("|{name} on {count:,} elements; this filter takes at most {limit:,} (PROMPT_RENDER_MAX_CHARS)"),
    "render_of_operator": N_("the {operator} operator"), "render_of_operator_times": N_("the {operator} operator ({times} times)"),
    "render_of_list_or_dict": N_("a list or dict"), "render_of_printing": N_("printing a value"), "render_of_block": N_("a block's output"),
    # refusals: calibration pages and the dashboard (calibration/frames.py, compare.py, alttest.py, calibrated.py; loop/dashboard.py)
    "group_field_invalid": N_("cannot group by {field_name!r}: use metadata.FIELD, split or feedback"),
    "judge_no_task_verdicts": N_("judge {judge} has no {task} verdicts in {dataset}"),
    "group_field_missing": N_("no sample of {dataset} has {field_name} (metadata fields: {fields})"),
    "nothing_to_compare": N_("nothing to compare between {a} and {b} on {dataset}: {detail}"),
    # nothing_to_compare's {detail} per task (calibration/compare.py); why the compare page and the disagreement list show nothing (loop/)
    "compare_verdict_counts": N_("{task}: {a} has {n_a} verdicts, {b} has {n_b}"),
    "compare_verdict_counts_split": N_("{task}: {a} has {n_a} verdicts in split {split}, {b} has {n_b}"),
    "compare_no_common": N_("{task}: no target has human gold and a verdict from both judges"),
    "compare_no_common_split": N_("{task}: no target in split {split} has human gold and a verdict from both judges"),
    "compare_no_verdicts": N_("neither {a} nor {b} has verdicts on {dataset}"),
    "compare_no_verdicts_split": N_("neither {a} nor {b} has verdicts on {dataset} in split {split}"),
    "compare_pick_two": N_("pick two judges to compare: A (the baseline) and B"),
    "compare_pick_different": N_("pick two different judges: A and B are both {judge}"),
    "compare_not_run": N_("{judge} has no run on {dataset}: run it first"),
    "disagreements_no_verdicts": N_("judge {judge} has no {task} verdicts on {dataset}"),
    "disagreements_no_verdicts_split": N_("judge {judge} has no {task} verdicts on {dataset} in split {split}"),
    # a form's or query's field that is not what it must be (views/fields.py, views/annotate.py: a 400)
    "field_whole_number": N_("{name} must be a whole number from {minimum:,} to {maximum:,}, got {raw!r}"),
    "field_evidence_sentence": N_("evidence_sentence must look like CONTEXT_ID:SENTENCE_INDEX"),
    "field_response_position": N_("value must be a response's position written with the digits 0-9, or tie"),
    "field_change": N_("change must be one of {actions}"), "field_claim_id": N_("claim must be a claim id"),
    "field_split_at": N_("at must be the character the claim is split at (0-based)"),
    "scoring_unknown": N_("scoring must be one of {scorings}, not {scoring!r}"),
    "min_items_invalid": N_("min-items must be a positive whole number, not {min_items!r}"),
    "extraction_not_calibrated": N_("task {task} extracts claims and is not calibrated against labels: its quality is how many claims "
                                    "experts changed (the dataset page)"),
    "agreement_unknown": N_("agreement must be unanimous or split, not {agreement!r}"),
    "no_such_target": N_("no target {target} in dataset {dataset}"),
    "target_wrong_kind": N_("{target!r} is not a {target2} target of task {task_row}"),
    "triage_unknown": N_("triage must be one of {triage_kinds}, not {kind_!r}"),
    "metadata_filter_shape": N_("metadata filter must be FIELD=VALUE, not {meta!r}"),
    "group_field_missing_none": N_("no sample of {dataset} has {field_name} (metadata fields: none)"),
    # refusals: the workbench and the queue (annotation/)
    "no_such_sample": N_("no sample {sample_id}"),
    "position_unknown": N_("value must be a response's position (1–{count}) or tie, got {text!r}"),
    "no_such_assignment": N_("no assignment {assignment_id}"),
    "no_such_task": N_("no task {ref!r}"),
    "target_changed": N_("{target} was changed meanwhile"),
    "target_key_shape": N_("target must look like claim:ID, context:ID, step:ID or sample:ID, got {key!r}"),
    "task_other_target": N_("task {task} labels {target}s, not {kind_}s"),
    "target_retired": N_("this {kind} was changed by someone else meanwhile: the item is shown again with its current {kind}s; label "
                         "it again"),
    "status_unknown": N_("status must be one of {statuses}"),
    "no_such_user": N_("no user {user_id}"),
    "priority_out_of_range": N_("cannot order a queue item with priority {sampled}: the sampled priorities are 0 to {value}"),
    "queue_judges_no_verdicts": N_("no {task} verdicts of {unknown} on {dataset} (judges with verdicts: {value})"),
    "queue_mode_unknown": N_("mode must be one of {modes}, not {mode!r}"),
    "queue_no_verdicts": N_("no judge has {task} verdicts on {dataset}: run or import a judge first"),
    "evidence_field": N_("{field}: {refusal}"),
    "evidence_not_item_context": N_("context {context_id} is not one of this item's contexts"),
    "evidence_no_sentence": ngettext("context #{number} has {count} sentence(s), not a sentence {index}",
                                     "context #{number} has {count} sentence(s), not a sentence {index}"),
    # refusals: tasks (tasks.py: a task's definition, a value that does not fit it)
    "value_not_a_response": N_("value {canonical!r} is not a response of this sample (responses: {choices})"),
    "task_name_invalid": N_("task name must be lowercase letters, digits and _, starting with a letter; got {name!r}"),
    "target_unknown": N_("target must be one of {targets}; got {target!r}"),
    "extraction_builtin_only": N_("kind extraction is claim_extraction's only (built in): a custom task cannot have it"),
    "kind_unknown": N_("kind must be one of {kinds}; got {kind_!r}"),
    "task_exists": N_("task {name!r} already exists"),
    "pairwise_target": N_("a pairwise task compares a sample's responses: --target sample, not {target}"),
    "pairwise_needs_labels": N_("a pairwise task needs --labels with the response ids (two or more) and optionally tie, e.g. --labels "
                                "A,B,tie or --labels 1,2"),
    "pairwise_no_responses": N_("task {task} compares responses, and this sample has none (give it responses)"),
    "task_in_use": N_("task {task} has {uses}: only a task nothing uses can be removed"),
    "uses_labels": ngettext("{count} labels", "{count} labels"),
    "uses_verdicts": ngettext("{count} verdicts", "{count} verdicts"),
    "uses_prompts": ngettext("{count} prompts", "{count} prompts"),
    "uses_one": N_("{first}"),
    "uses_two": N_("{first} and {second}"),
    "uses_three": N_("{first} and {second} and {third}"),
    "extraction_not_list": N_("an extraction's value must be a list of claims, got {name}"),
    "extraction_empty": N_("empty: the extraction has no claims"),
    "extraction_too_many": N_("{count} claims: at most {max_claims} in one answer"),
    "categorical_needs_labels": N_("a categorical task needs --labels with at least two labels, e.g. --labels A,B,tie"),
    "labels_duplicates": N_("--labels has duplicates: {clean}"),
    "scale_wrong_kind": N_("--scale is for ordinal and continuous tasks, not {kind_} ones"),
    "error_types_wrong_kind": N_("--error-types is for categorical tasks: {task} is not one"),
    "labels_wrong_kind": N_("--labels is for categorical and pairwise tasks; use --scale for ordinal and continuous ones"),
    "ordinal_needs_scale": N_("an ordinal task needs --scale, e.g. --scale 1-5"),
    "response_id_too_long": N_("--labels: response id {label!r} is longer than {max_response_id_chars} characters"),
    "display_shape": N_("--display {item!r} must look like LOCALE:LABEL=NAME, e.g. es:supported=Respaldada"),
    "display_locale": N_("--display {item!r}: locale must be one of {listed}"),
    "extraction_claim_empty": N_("claim {index} must be a non-empty string, got {value!r}"),
    "extraction_claim_too_long": N_("claim {index} has {count:,} characters: at most {max_claim_chars:,}"),
    "description_twice": N_("--description gives the {locale} text twice: {item!r}"),
    "value_type_not_label": N_("value must be one of {listed}, got {name}"),
    "extraction_not_json": N_("an extraction's value must be a JSON list of claims"),
    "value_needs_label": N_("value must be a label, got {value!r}"),
    "value_needs_number": N_("value must be a number, got {value!r}"),
    "level_shape": N_("--level {item!r} must look like [LOCALE:]LEVEL=TEXT, e.g. 5=correct and complete or "
                      "es:5=correcta y completa"),
    "level_twice": N_("--level gives the {locale} text of level {level} twice"),
    "levels_builtin": N_("task {task} is built in: its levels are described by its guideline, in every language"),
    "levels_wrong_kind": N_("--level is for categorical and ordinal tasks; {task} is {kind_}"),
    "level_not_a_label": N_("--level: task {task} has no label {level!r} (labels: {labels})"),
    "level_not_a_score": N_("--level: {level!r} is not a whole score of task {task} ({low}–{high})"),
    "level_text_shape": N_("--level: the text of level {level} must be one line of at most {limit} characters"),
    # refusals: sampling and assigning work (ingest/sampling.py: the team page's Assign form, `calibrate sample`)
    "split_spec_empty": N_("the split spec is empty: give e.g. train=0.2,dev=0.4,test=0.4"),
    "split_spec_none": N_("{where}: no splits given; give e.g. train=0.2,dev=0.4,test=0.4"),
    "split_spec_unknown": N_("{where}: unknown split {listed}; splits are {splits}"),
    "split_spec_sum": N_("{where}: the fractions must sum to 1, they sum to {total:g} ({shown})"),
    "strata_too_many": N_("cannot give each of {count} strata a sample with n = {n}"),
    "assign_unknown_annotators": N_("cannot assign: {problems}; existing annotators: {listing}"),
    "overlap_too_few_annotators": ngettext("overlap {overlap} needs at least {overlap} annotators, but {count} is named ({wanted})",
                                           "overlap {overlap} needs at least {overlap} annotators, but {count} are named ({wanted})"),
    "sample_size_one": N_("give exactly one of n or fraction"),
    "sample_n_invalid": N_("n must be a whole number ≥ 1, got {n!r}"),
    "sample_fraction_invalid": N_("fraction must be > 0 and ≤ 1 (e.g. 0.02 for 2 %), got {fraction!r}"),
    "sample_seed_invalid": N_("seed must be a whole number ≥ 0, got {seed!r}"),
    "overlap_invalid": N_("overlap must be a whole number ≥ 1, got {overlap!r}"),
    "dataset_no_samples": N_("dataset {dataset!r} has no samples: import some first (calibrate import samples FILE --dataset {dataset})"),
    "stratify_too_few": N_("cannot stratify by {field_name}: {asked} is fewer than its {count} strata, and every stratum needs at "
                           "least one sample; take at least {count} or stratify by a coarser field"),
    "split_spec_item": N_("split spec {text!r}: {item!r} is not NAME=FRACTION (e.g. train=0.2,dev=0.4,test=0.4)"),
    "split_spec_unknown_name": N_("split spec {text!r}: unknown split {name!r}; splits are {splits}"),
    "split_spec_twice": N_("split spec {text!r}: {name} is given twice"),
    "split_spec_fraction": N_("{where}: {name} must be a fraction > 0, got {value!r}"),
    "stratify_field_unset": N_("no sample of {dataset} has {field_name} set; nothing to stratify by"),
    "split_spec_not_number": N_("split spec {text!r}: {name}={value} is not a number"),
    "assign_unknown_users": ngettext("unknown user {names}",
                                     "unknown users {names}"),
    "assign_inactive_users": ngettext("inactive user {names}",
                                      "inactive users {names}"),
    "assign_no_annotators": N_("none (add them with `calibrate users add NAME`)"),
    "split_spec_named": N_("split spec {source!r}"),
    "split_spec_given": N_("split"),
    # refusals: the calibration pages' parameters and the frozen test split (calibration/alttest.py, loop/)
    "epsilon_out_of_range": N_("epsilon must lie strictly between 0 and 1, not {value!r} (the cost-benefit margin ε in "
                               "(0, 1); the paper suggests 0.2 for experts (the default), 0.15 for skilled annotators "
                               "and 0.1 for crowd workers)"),
    "alpha_out_of_range": N_("alpha must lie strictly between 0 and 1, not {value!r}"),
    "fewshot_imported_judge": N_("this judge is imported, not a prompt version: there is no prompt to add an example to"),
    "fraction_not_number": N_("fraction must be a number such as 0.02"),
    # refusals: stratifying a sample (ingest/sampling.py)
    "stratify_field_invalid": N_("cannot stratify by {spec!r}{hint}: give metadata.FIELD, feedback or split; {fields}"),
    "stratify_did_you_mean": N_(" (did you mean metadata.{text}?)"),
    "stratify_field_missing": N_("no sample of {dataset} has {field_name}; {fields}"),
    "metadata_fields_of": N_("metadata fields of {dataset}: {fields}"),
    "metadata_fields": N_("metadata fields: {fields}"),
    "no_metadata": N_("the samples of {dataset} have no metadata"),
    # the instruction rewrite (judges/rewrite.py) and `calibrate optimise` (loop/optimise.py; docs/loop.md, "Optimise")
    "rewrite_not_calibrated": N_("task {task} rewrites a judge's instructions for calibrate optimise and is not calibrated "
                                 "against labels"),
    "rewrite_not_run": N_("{prompt} is a prompt of task {task}: calibrate optimise asks it for new instructions; it is never "
                          "run over a dataset"),
    "fewshot_rewrite_task": N_("few-shot examples are not supported for the task {task_row}: its requests show a batch of "
                               "disagreements instead"),
    "rewrite_unchanged": N_("the rewrite returned the instructions unchanged"),
    "rewrite_fields_changed": N_("the rewrite changed the template's fields or blocks (removed: {removed}; added: {added}); "
                                 "a rewrite may change the wording only"),
    "rewrite_reply_changed": N_("the rewrite changed the reply format (its lines: {lines}); a rewrite may change the wording "
                                "only"),
    "rewrite_template_refused": N_("the rewritten instructions are not a valid template: {why}"),
    "rewrite_unusable": N_("the rewrite gave no usable instructions ({status}: {error})"),
    "optimise_metric_task": N_("{task} is a metric task: its verdicts are computed from steps (and embeddings), not read from "
                               "one prompt's answer per target, so its judge has no prompt to optimise"),
    "optimise_other_task": N_("{start} is a prompt of task {task}, not {task2}"),
    "optimise_target_range": N_("--target must lie in (0, 1], not {target!r}"),
    "optimise_baseline": N_("the baseline judge reads no prompt: there is nothing to optimise; use --backend openai or "
                            "anthropic"),
    "optimise_strategies": N_("--strategies must be one or more of {strategies}, not {given!r}"),
    "optimise_adjustment": N_("--adjustment must be one of {adjustments}, not {given!r}"),
    "optimise_bounds": N_("--max-candidates must be at least 2 and --patience at least 1 (got {max_candidates} and {patience})"),
    "optimise_no_dev": N_("{dataset} has no dev split: candidates are selected on dev. Make one with calibrate sample "
                          "--dataset {dataset} --fraction 1 --split train=0.6,dev=0.2,test=0.2"),
    "optimise_no_train_gold": N_("no train item of {dataset} has gold for {task}: candidates are built from the train split "
                                 "only; label some train items first"),
    "optimise_no_dev_gold": N_("no dev item of {dataset} has gold for {task}: candidates are selected on dev; label some dev "
                               "items first"),
    "optimise_cost_unpriced": N_("--max-cost needs the price of {model}: add it to instance/prices.json (docs/judges.md)"),
    "optimise_rewriter_task": N_("{rewriter} is not a prompt of task instruction_rewrite"),
    "optimise_in_progress": N_("optimisation {id} with these settings is running; wait for it or cancel it"),
    "optimise_test_looked": ngettext("the test split of {dataset} was already looked at {count} time for {task}: a second "
                                     "confirmation is refused; pass --reuse-test to confirm on it anyway (the result says "
                                     "which look it is)",
                                     "the test split of {dataset} was already looked at {count} times for {task}: a second "
                                     "confirmation is refused; pass --reuse-test to confirm on it anyway (the result says "
                                     "which look it is)"),
    "optimise_not_confirmed": N_("{dataset} has no test split: the result rests on dev only and is not confirmed"),
    "optimise_test_unlabelled": N_("the test split of {dataset} has no {task} labels: the result rests on dev only and is not "
                                   "confirmed"),
    "optimise_test_reused": N_("this is look {look} at the test split of {dataset} for {task} (--reuse-test): a score chosen "
                               "among several looks is no longer an honest estimate"),
    "stop_target_reached": N_("{version}'s lower bound on dev, adjusted for the looks, reached the target {target}"),
    "stop_budget": N_("the budget ran out ({calls} calls, ${cost}); run again with a larger --max-calls or --max-cost to "
                      "continue"),
    "stop_max_candidates": N_("{max_candidates} candidates were proposed (--max-candidates)"),
    "stop_no_improvement": N_("the best adjusted lower bound did not rise in the last {rounds} rounds (--patience)"),
    "stop_cannot_reach": N_("the last round raised nothing and the best candidate's upper bound {upper:.3f} is below the "
                            "target {target}"),
    "stop_ceiling_below_target": N_("the experts agree with each other at {ceiling:.3f} (upper bound {upper:.3f}), below the "
                                    "target: no judge can be shown to agree with them better than they agree with each other"),
    "stop_cancelled": N_("cancelled before it finished; run the same command again to continue"),
    "optimise_form_number": N_("{name} must be a number, not {raw!r}"),
    "optimise_form_backend": N_("choose a configured backend ({backends}), not {backend!r}"),
}
