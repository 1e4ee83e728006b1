//! The session badge: with the panels hidden (Tab), a line in the canvas's bottom-left corner says that a
//! recording runs or a demo replays, which only the hidden Demo section said before, and for a few seconds after a
//! recording stops, where it was saved (or why it was not). A user who hid the panels to watch the scene could
//! forget a recording, take a replay for the sandbox, or stop a recording without a word. Drawn by the scene
//! camera, in pixels of the window, and only in the window (the exporter has its own overlay). At the bottom:
//! at the top it covered the first lane's title in a small window.

use bevy::prelude::*;
use bevy::sprite::Anchor;

use super::UiState;
use super::render::{MainCamera, camera_scale};
use crate::sim::{Recorder, Replay, SimControl, SimLog};

/// Height of the badge's text [logical px].
const BADGE_PX: f32 = 15.0;
/// Distance of the badge from the canvas's corner [logical px].
const BADGE_MARGIN_PX: f32 = 10.0;
/// Above the labels.
const BADGE_Z: f32 = 60.0;
/// Colour of a recording's badge, the Demo section's red.
const RECORDING_RGB: [u8; 3] = [235, 64, 52];
/// Colour of a replay's badge, and of a saved recording's.
const REPLAY_RGB: [u8; 3] = [215, 220, 230];
/// How long the badge tells of a recording that stopped [s].
const STOPPED_SECONDS: f64 = 5.0;

/// What the badge tells for [`STOPPED_SECONDS`]: where the last recording was saved, or the latest error.
#[derive(Default)]
struct Stopped {
    was_recording: bool,
    errors_seen: u64,
    /// The save's line, whether it is an error, and until when it is told [real s].
    said: Option<(String, bool, f64)>,
}

pub struct BadgePlugin;

impl Plugin for BadgePlugin {
    fn build(&self, app: &mut App) {
        app.add_systems(
            PostUpdate,
            place_badge
                .before(bevy::transform::TransformSystems::Propagate)
                .before(bevy::sprite::update_text2d_layout),
        );
    }
}

#[derive(Component)]
struct SessionBadge;

/// What the badge says, if anything: `None` with the panels shown (the panels say it), or with neither a
/// recording, a replay nor something `told` lately (a stopped recording's save, or an error: the F5 refused
/// during a replay, a save that failed). Red for a recording or an error. ASCII only: the scene's font (Bevy's
/// default) has no bullet, middle dot, ellipsis or play sign.
fn badge_text(
    show_ui: bool,
    recorder: Option<&Recorder>,
    replay: Option<&Replay>,
    (ticks, paused): (u64, bool),
    told: Option<(&str, bool)>,
) -> Option<(String, [u8; 3])> {
    if show_ui {
        return None;
    }
    let session = if let Some(replay) = replay {
        let player = &replay.player;
        let state = if player.tick() >= player.demo.ticks {
            "REPLAY (at its end)"
        } else if replay.playing {
            "REPLAY"
        } else {
            "REPLAY (paused)"
        };
        Some((
            format!(
                "{state} {}, tick {} / {}: {}   [Tab: panels]",
                player.file,
                player.tick(),
                player.demo.ticks,
                replay.badge()
            ),
            REPLAY_RGB,
        ))
    } else if let Some(recorder) = recorder.filter(|r| r.is_recording()) {
        let actions = crate::text::counted(recorder.actions() as u64, "action", "actions");
        let ticks = recorder.ticks(ticks);
        let text = if recorder.recording.as_ref().and_then(|r| r.ended).is_some() {
            format!("REC full: ended at tick {ticks}, {actions}; save it (F5)   [Tab: panels]")
        } else {
            // Paused, a recording gathers no ticks: said, or a user could save an empty demo unaware.
            let paused = if paused { " PAUSED (P resumes)," } else { "" };
            format!("REC{paused} tick {ticks}, {actions} (F5 stops and saves)   [Tab: panels]")
        };
        Some((text, RECORDING_RGB))
    } else {
        None
    };
    let (text, rgb) = match (session, told) {
        (None, None) => return None,
        (Some(session), None) => session,
        (None, Some((said, error))) => (
            said.to_string(),
            if error { RECORDING_RGB } else { REPLAY_RGB },
        ),
        (Some((line, rgb)), Some((said, error))) => (
            format!("{line}\n{said}"),
            if error { RECORDING_RGB } else { rgb },
        ),
    };
    Some((super::fonts::scene_font_text(&text), rgb))
}

/// PostUpdate: the badge in the canvas's bottom-left corner, spawned the first time it is wanted and hidden while it
/// is not.
#[allow(clippy::type_complexity, clippy::too_many_arguments)] // a Bevy system: each parameter is one query or resource
fn place_badge(
    mut commands: Commands,
    ui: Option<Res<UiState>>,
    recorder: Option<Res<Recorder>>,
    replay: Option<Res<Replay>>,
    control: Option<Res<SimControl>>,
    log: Option<Res<SimLog>>,
    time: Res<Time<Real>>,
    mut stopped: Local<Stopped>,
    cameras: Query<(&Camera, &Transform, &Projection), (With<MainCamera>, Without<SessionBadge>)>,
    mut badges: Query<
        (
            &mut Text2d,
            &mut TextColor,
            &mut Transform,
            &mut bevy::text::TextBounds,
            &mut Visibility,
        ),
        With<SessionBadge>,
    >,
) {
    let now = time.elapsed_secs_f64();
    let recording = recorder.as_deref().is_some_and(Recorder::is_recording);
    let raised = log.as_deref().map_or(0, |log| log.raised);
    let error = log.as_deref().and_then(|log| log.error.clone());
    let info = log.as_deref().and_then(|log| log.info.clone());
    let new_error = error.filter(|_| raised > stopped.errors_seen);
    if stopped.was_recording && !recording {
        // The save's word, written by the same update that stopped the recording, with an error raised beside it.
        let saved = info.map(|said| format!("REC stopped: {said}"));
        let said = match (saved, new_error) {
            (Some(saved), Some(error)) => Some((format!("{saved}\n{error}"), true)),
            (Some(saved), None) => Some((saved, false)),
            (None, error) => error.map(|error| (error, true)),
        };
        stopped.said = said.map(|(said, error)| (said, error, now + STOPPED_SECONDS));
    } else if let Some(error) = new_error {
        // An error raised since the last frame: with the panels hidden, nothing else would show it.
        stopped.said = Some((error, true, now + STOPPED_SECONDS));
    } else if recording && stopped.said.as_ref().is_some_and(|(_, error, _)| !error) {
        // A new recording: the last one's save is old news.
        stopped.said = None;
    }
    // An error the log no longer holds (answered, or cleared) is not told.
    let current = log.as_deref().and_then(|log| log.error.as_deref());
    if stopped
        .said
        .as_ref()
        .is_some_and(|(said, error, _)| *error && current.is_none_or(|e| !said.ends_with(e)))
    {
        stopped.said = None;
    }
    stopped.was_recording = recording;
    stopped.errors_seen = raised;
    let told = stopped
        .said
        .as_ref()
        .filter(|(_, _, until)| now < *until)
        .map(|(said, error, _)| (said.as_str(), *error));
    let wanted = badge_text(
        ui.is_none_or(|ui| ui.show_ui),
        recorder.as_deref(),
        replay.as_deref(),
        control.map_or((0, false), |c| (c.ticks, c.paused)),
        told,
    );
    let placed = cameras.single().ok().and_then(|(camera, at, projection)| {
        let size = camera.logical_viewport_size()?;
        let scale = camera_scale(projection);
        let corner = Vec2::new(
            -size.x / 2.0 + BADGE_MARGIN_PX,
            -size.y / 2.0 + BADGE_MARGIN_PX,
        ) * scale;
        // Wrapped (upwards, from the bottom) within the canvas: a long save path ran off its edge.
        let bounds =
            bevy::text::TextBounds::new_horizontal((size.x - 2.0 * BADGE_MARGIN_PX).max(40.0));
        Some((
            Transform::from_translation(at.translation + corner.extend(BADGE_Z))
                .with_scale(Vec3::new(scale, scale, 1.0)),
            bounds,
        ))
    });
    let (Some((text, rgb)), Some((place, bounds))) = (wanted, placed) else {
        for (_, _, _, _, mut visibility) in &mut badges {
            visibility.set_if_neq(Visibility::Hidden);
        }
        return;
    };
    let color = TextColor(Color::srgb_u8(rgb[0], rgb[1], rgb[2]));
    let Some((mut shown, mut shown_color, mut transform, mut shown_bounds, mut visibility)) =
        badges.iter_mut().next()
    else {
        commands.spawn((
            SessionBadge,
            Text2d::new(text),
            TextFont {
                font_size: bevy::text::FontSize::Px(BADGE_PX),
                ..default()
            },
            color,
            bevy::text::TextBackgroundColor({
                let [r, g, b] = super::BACKGROUND_RGB;
                Color::srgba_u8(r, g, b, 200)
            }),
            Anchor::BOTTOM_LEFT,
            place,
            bounds,
        ));
        return;
    };
    if shown.0 != text {
        shown.0 = text;
    }
    shown_color.set_if_neq(color);
    transform.set_if_neq(place);
    if (shown_bounds.width, shown_bounds.height) != (bounds.width, bounds.height) {
        *shown_bounds = bounds;
    }
    visibility.set_if_neq(Visibility::Inherited);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_badge_speaks_only_with_the_panels_hidden_and_a_session_running() {
        let mut recorder = Recorder::default();
        assert_eq!(
            badge_text(false, Some(&recorder), None, (10, false), None),
            None
        );
        let saved = "REC stopped: saved demos/a.demo.ron (30 ticks, 0 actions)";
        assert_eq!(
            badge_text(
                false,
                Some(&recorder),
                None,
                (10, false),
                Some((saved, false))
            ),
            Some((saved.to_string(), REPLAY_RGB))
        );
        assert_eq!(
            badge_text(
                true,
                Some(&recorder),
                None,
                (10, false),
                Some((saved, false))
            ),
            None
        );
        let scene = crate::scene::Scene::load(std::path::Path::new("assets/scenes/wall_throw.ron"))
            .expect("the shipped scene loads");
        recorder.begin(scene, 60.0, 100);
        assert_eq!(
            badge_text(true, Some(&recorder), None, (130, false), None),
            None
        );
        let (text, rgb) =
            badge_text(false, Some(&recorder), None, (130, false), None).expect("a badge");
        assert_eq!(
            text,
            "REC tick 30, 0 actions (F5 stops and saves)   [Tab: panels]"
        );
        assert_eq!(rgb, RECORDING_RGB);
        let (text, _) =
            badge_text(false, Some(&recorder), None, (130, true), None).expect("a badge");
        assert_eq!(
            text,
            "REC PAUSED (P resumes), tick 30, 0 actions (F5 stops and saves)   [Tab: panels]"
        );
        // An error while recording (a save refused): on a line of its own, in the scene font's letters.
        let refused = "save as demos/: that is a folder; name the file, e.g. demos/mine.demo.ron; still recording";
        let (text, rgb) = badge_text(
            false,
            Some(&recorder),
            None,
            (130, false),
            Some((refused, true)),
        )
        .expect("a badge");
        assert_eq!(
            text,
            format!("REC tick 30, 0 actions (F5 stops and saves)   [Tab: panels]\n{refused}")
        );
        assert_eq!(rgb, RECORDING_RGB);
        assert!(text.is_ascii());
    }

    #[test]
    fn the_badge_writes_only_what_the_scene_font_draws() {
        assert_eq!(
            super::super::fonts::scene_font_text("checking… (3 hashes match) · 1–2 × 10 é\nnext"),
            "checking... (3 hashes match) , 1-2 x 10 ?\nnext"
        );
    }
}
