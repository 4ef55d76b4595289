//! Evaluation of a detector on a dataset split (being written).
