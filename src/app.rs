//! The windowed sandbox.

/// Opens the sandbox window on the default scene.
pub fn run_gui() -> anyhow::Result<()> {
    anyhow::bail!("the sandbox window is not built yet")
}
