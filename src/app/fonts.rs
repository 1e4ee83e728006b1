//! The glyphs the panels need beyond egui's default text font.
//!
//! egui's proportional font (Ubuntu Light) lacks arrows, superscript signs and the round bullet, which the rod
//! impacts (`c⁻ → c⁺`) and the recording title (`●`) use; egui draws a missing glyph as an empty box. Its
//! monospace font (Hack), which egui always loads, has them, so it becomes the text font's fallback. No font
//! here draws combining marks, so scene text that uses them (`d̂`, `x̃`) is spelt out instead ([`displayable`]).

use std::borrow::Cow;

use bevy::prelude::*;
use bevy_egui::{EguiContexts, EguiPrimaryContextPass, egui};

pub struct FontsPlugin;

impl Plugin for FontsPlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(EguiPrimaryContextPass, install_fonts);
    }
}

/// egui's default fonts, with the monospace font behind the proportional one for the glyphs it lacks.
pub fn font_definitions() -> egui::FontDefinitions {
    let mut fonts = egui::FontDefinitions::default();
    let monospace = fonts
        .families
        .get(&egui::FontFamily::Monospace)
        .cloned()
        .unwrap_or_default();
    let proportional = fonts
        .families
        .entry(egui::FontFamily::Proportional)
        .or_default();
    for name in monospace {
        if !proportional.contains(&name) {
            proportional.push(name);
        }
    }
    fonts
}

/// Installs [`font_definitions`] once, on the first frame the context exists.
fn install_fonts(mut contexts: EguiContexts, mut installed: Local<bool>) -> Result {
    if *installed {
        return Ok(());
    }
    contexts.ctx_mut()?.set_fonts(font_definitions());
    *installed = true;
    Ok(())
}

/// `text` in the characters the scene's font has (Bevy's default font: printable ASCII): d̂ and x̃ spelt out as
/// [`displayable`] does, "..." for "…", "," for "·", "-" for dashes, "x" for "×", the settings' Greek letters
/// and "²" spelt out ("mu", "kappa", "eps", "^2"), "?" for the rest. Text drawn in the scene (the badge, the
/// lanes' titles) goes through it: the font drew a box for every other character.
pub fn scene_font_text(text: &str) -> String {
    let text = displayable(text);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '…' => out.push_str("..."),
            '·' => out.push(','),
            '–' | '—' | '−' => out.push('-'),
            '×' => out.push('x'),
            'μ' | 'µ' => out.push_str("mu"),
            'κ' => out.push_str("kappa"),
            'ε' => out.push_str("eps"),
            '²' => out.push_str("^2"),
            '\n' => out.push('\n'),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            _ => out.push('?'),
        }
    }
    out
}

/// `text` with the combining circumflex and tilde spelt out (`d̂` → `dhat`, `x̃` → `x~`), since no font the
/// panels use can draw them.
pub fn displayable(text: &str) -> Cow<'_, str> {
    const CIRCUMFLEX: char = '\u{302}';
    const TILDE: char = '\u{303}';
    if !text.contains([CIRCUMFLEX, TILDE]) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            CIRCUMFLEX => out.push_str("hat"),
            TILDE => out.push('~'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{ActiveScene, BUILT_IN_SCENES};
    use std::path::Path;

    /// Whether every character of `text` has a glyph in the panels' text font.
    fn drawable(ctx: &egui::Context, text: &str) -> Vec<char> {
        let font = egui::FontId::proportional(14.0);
        text.chars()
            .filter(|&c| !ctx.fonts_mut(|f| f.has_glyph(&font, c)))
            .collect()
    }

    fn context(fonts: egui::FontDefinitions) -> egui::Context {
        let ctx = egui::Context::default();
        ctx.set_fonts(fonts);
        let _ = ctx.run_ui(egui::RawInput::default(), |_| {});
        ctx
    }

    /// The panels' own symbols: rod impacts, recording, units, the pre-flight and slope lines.
    const SYMBOLS: &str = "c⁻ → c⁺ ● ■ ▶ ◀ ⏸ ⏮ ⚠ · × µ κ μ Δ § ± ≤ ≥ … — – ½ ² ³ θ ω ν α ∞ √";

    #[test]
    fn every_symbol_of_the_panels_and_every_scene_text_has_a_glyph() {
        let ctx = context(font_definitions());
        assert_eq!(drawable(&ctx, SYMBOLS), Vec::<char>::new());
        for path in BUILT_IN_SCENES
            .iter()
            .chain(&["assets/scenes/ball_pit_2000.ron"])
        {
            let scene = ActiveScene::load(Path::new(path)).expect("a shipped scene loads");
            for text in [&scene.current.name, &scene.current.description] {
                assert_eq!(
                    drawable(&ctx, &displayable(text)),
                    Vec::<char>::new(),
                    "{path}: {text}"
                );
            }
        }
    }

    /// The lane panel's hover help names κ, Σ, d̂, 10⁻³ …: every character of it has a glyph.
    #[test]
    fn every_setting_s_help_has_a_glyph() {
        use crate::sim::LaneSetting;
        let ctx = context(font_definitions());
        for setting in LaneSetting::ALL {
            assert_eq!(
                drawable(&ctx, &displayable(setting.help())),
                Vec::<char>::new(),
                "{setting:?}"
            );
        }
    }

    #[test]
    fn egui_alone_would_draw_boxes_for_some_of_them() {
        // Guards the test above: with egui's defaults the arrows and signs are missing.
        let ctx = context(egui::FontDefinitions::default());
        assert!(!drawable(&ctx, SYMBOLS).is_empty());
        assert!(!drawable(&ctx, "d\u{302}").is_empty());
    }

    #[test]
    fn combining_marks_are_spelt_out_and_other_text_is_borrowed() {
        assert_eq!(
            displayable("IPC (d\u{302} = 1 mm, x\u{303})"),
            "IPC (dhat = 1 mm, x~)"
        );
        assert!(matches!(displayable("κ = 1e4 · µm"), Cow::Borrowed(_)));
    }
}
