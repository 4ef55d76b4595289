//! libtorch is really linked and trains: a convolution's loss falls under Adam.
#![cfg(feature = "libtorch")]

#[test]
fn conv_forward_backward_adam_step_lowers_the_loss() {
    let report = headroom_train::libtorch_check().expect("libtorch check runs");
    assert!(report.loss_before.is_finite() && report.loss_before > 0.0, "{report:?}");
    assert!(report.loss_after < 0.5 * report.loss_before, "Adam did not lower the loss: {report:?}");
    assert!(report.threads >= 1);
}
