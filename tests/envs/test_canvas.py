"""The shared drawing layer: transform, primitives at the right pixels, frames, window."""

from __future__ import annotations

import numpy as np
import pytest

from goalenvs.envs.canvas import Canvas, Window, box_corners

pygame = pytest.importorskip("pygame")

RED, BLUE, GREEN, WHITE = (220, 30, 30), (30, 30, 220), (30, 200, 30), (255, 255, 255)


def make_canvas(size=(200, 100), bounds=(-1.0, 1.0, -1.0, 1.0)) -> Canvas:
    canvas = Canvas(size, bounds)
    canvas.clear()
    return canvas


def test_transform_maps_world_corners_and_centres_the_narrow_axis():
    canvas = make_canvas(size=(200, 100))
    # The height limits the scale: 100 px for 2 world units; x is centred.
    assert canvas.pixels_per_unit == pytest.approx(50.0)
    assert canvas.to_pixel((0.0, 0.0)) == (100, 50)
    assert canvas.to_pixel((-1.0, 1.0)) == (50, 0)  # world y up is pixel row 0
    assert canvas.to_pixel((1.0, -1.0)) == (150, 100)
    assert canvas.length(0.5) == 25
    assert canvas.length(1e-6) == 1


def test_transform_with_offset_bounds_and_round_trip():
    canvas = make_canvas(size=(300, 300), bounds=(0.0, 10.0, 5.0, 15.0))
    assert canvas.to_pixel((0.0, 15.0)) == (0, 0)
    assert canvas.to_pixel((10.0, 5.0)) == (300, 300)
    world = np.array([[1.25, 7.5], [9.0, 14.0]])
    np.testing.assert_allclose(canvas.to_pixels(world), [[37.5, 225.0], [270.0, 30.0]])


@pytest.mark.parametrize(
    ("size", "bounds"),
    [((0, 10), (0, 1, 0, 1)), ((10, 10), (1, 1, 0, 1)), ((10, 10), (0, 1, 2, 1))],
)
def test_bad_size_or_bounds_raise_naming_the_argument(size, bounds):
    with pytest.raises(ValueError, match=r"size|world_bounds"):
        Canvas(size, bounds)


def test_rgb_array_is_fresh_writable_uint8_of_shape_h_w_3():
    canvas = make_canvas(size=(64, 48))
    canvas.clear((1, 2, 3))
    frame = canvas.rgb_array()
    assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8
    assert frame.flags.writeable and frame.flags.c_contiguous
    assert (frame == np.array([1, 2, 3], np.uint8)).all()
    frame[:] = 0
    assert (canvas.rgb_array() == np.array([1, 2, 3], np.uint8)).all()


def test_rgb_array_matches_pygame_readback_channel_order():
    canvas = make_canvas(size=(40, 30))
    canvas.surface.fill((10, 20, 30))
    canvas.surface.fill((200, 100, 50), pygame.Rect(5, 7, 3, 2))
    expected = np.transpose(pygame.surfarray.array3d(canvas.surface), (1, 0, 2))
    np.testing.assert_array_equal(canvas.rgb_array(), expected)
    assert tuple(canvas.rgb_array()[7, 5]) == (200, 100, 50)


def test_circle_lands_at_its_world_position():
    canvas = make_canvas(size=(200, 200))
    canvas.circle((0.5, 0.5), 0.1, RED)
    frame = canvas.rgb_array()
    column, row = canvas.to_pixel((0.5, 0.5))  # (150, 50)
    assert (column, row) == (150, 50)
    assert tuple(frame[row, column]) == RED
    assert tuple(frame[row, column + 8]) == RED  # radius is 10 px
    assert tuple(frame[row, column + 12]) == WHITE
    assert tuple(frame[200 - row, column]) == WHITE  # not mirrored in y


def test_circle_outline_leaves_the_inside_empty():
    canvas = make_canvas(size=(200, 200))
    canvas.circle((0.0, 0.0), 0.5, BLUE, width=2)
    frame = canvas.rgb_array()
    assert tuple(frame[100, 100]) == WHITE
    assert tuple(frame[100, 100 + 49]) == BLUE


def test_rect_covers_its_world_extent():
    canvas = make_canvas(size=(200, 200))
    canvas.rect(0.0, 0.0, 0.5, 0.25, GREEN)
    frame = canvas.rgb_array()
    mask = (frame == np.array(GREEN, np.uint8)).all(axis=-1)
    rows, cols = np.nonzero(mask)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (75, 99, 100, 149)


def test_box_rotates_about_its_centre():
    corners = box_corners((1.0, 2.0), length=2.0, width=1.0, angle=np.pi / 2)
    # Heading +y: the front edge is at y = 3, the left side at x = 0.5.
    np.testing.assert_allclose(corners, [[0.5, 3.0], [1.5, 3.0], [1.5, 1.0], [0.5, 1.0]])
    canvas = make_canvas(size=(200, 200))
    canvas.box((0.0, 0.0), 1.0, 0.2, np.pi / 2, RED)
    frame = canvas.rgb_array()
    assert tuple(frame[100 - 40, 100]) == RED  # along the heading (up)
    assert tuple(frame[100, 100 + 40]) == WHITE  # the box is narrow across it


def test_line_and_arrow_draw_between_their_ends():
    canvas = make_canvas(size=(200, 200))
    canvas.line((-1.0, 0.0), (1.0, 0.0), RED, width=1)
    canvas.arrow((-0.5, 0.5), (0.5, 0.5), GREEN, width=1)
    frame = canvas.rgb_array()
    assert tuple(frame[100, 10]) == RED
    assert tuple(frame[50, 10]) == WHITE  # nothing off the line's row
    assert tuple(frame[50, 60]) == GREEN
    head = (frame[45:56, 140:151] == np.array(GREEN, np.uint8)).all(axis=-1)
    assert head.sum() > 10  # the arrow head is a filled triangle
    canvas.clear()
    canvas.arrow((0.0, 0.0), (0.001, 0.0), RED)  # shorter than a pixel: nothing
    assert (canvas.rgb_array() == 255).all()


def test_text_draws_on_its_background_box():
    canvas = make_canvas(size=(200, 200))
    left, top, width, height = canvas.text("step 3", (20, 30), (0, 0, 0), 18, background=BLUE)
    assert (left, top) == (18, 28) and width > 20 and height > 10
    frame = canvas.rgb_array()
    box = frame[top : top + height, left : left + width]
    assert tuple(box[0, 0]) == BLUE
    assert ((box == 0).all(axis=-1)).any()  # some glyph pixels are black


def test_snapshot_restores_the_static_scenery():
    canvas = make_canvas(size=(50, 50))
    canvas.rect(-1, -1, 0, 0, BLUE)
    scenery = canvas.snapshot()
    canvas.circle((0.5, 0.5), 0.3, RED)
    canvas.restore(scenery)
    frame = canvas.rgb_array()
    assert tuple(frame[12, 37]) == WHITE and tuple(frame[37, 12]) == BLUE


def test_human_window_opens_shows_the_surface_and_closes():
    canvas = make_canvas(size=(80, 60))
    canvas.clear(RED)
    canvas.show(fps=1000)
    assert canvas.window.is_open and pygame.display.get_init()
    shown = np.transpose(pygame.surfarray.array3d(pygame.display.get_surface()), (1, 0, 2))
    assert tuple(shown[30, 40]) == RED
    assert pygame.display.get_surface().get_size() == (80, 60)
    canvas.close()
    assert not canvas.window.is_open and not pygame.display.get_init()
    canvas.close()  # idempotent


def test_window_keeps_events_for_the_caller_and_stops_after_quit():
    window = Window((50, 40), "test")
    window.open()
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_LEFT))
    assert window.show(np.zeros((40, 50, 3), np.uint8), fps=1000)
    events = window.events()
    assert [e.key for e in events if e.type == pygame.KEYDOWN] == [pygame.K_LEFT]
    assert window.events() == []
    pygame.event.post(pygame.event.Event(pygame.QUIT))
    assert not window.show(np.zeros((40, 50, 3), np.uint8))
    assert window.closed and not window.is_open
    assert not window.show(np.zeros((40, 50, 3), np.uint8))  # stays closed
    assert any(e.type == pygame.QUIT for e in window.events())
    window.close()
    assert not window.closed  # a fresh show would open it again


def test_window_reopens_after_someone_else_quit_the_display():
    window = Window((30, 20))
    assert window.show(np.zeros((20, 30, 3), np.uint8))
    pygame.display.quit()
    assert not window.is_open
    assert window.show(np.full((20, 30, 3), 7, np.uint8))
    assert pygame.display.get_surface().get_size() == (30, 20)
    window.close()


def test_two_windows_share_the_one_display():
    first, second = Window((30, 20)), Window((40, 20))
    first.show(np.zeros((20, 30, 3), np.uint8))
    second.show(np.zeros((20, 40, 3), np.uint8))
    assert second.is_open and not first.is_open
    first.close()  # no longer the owner: the display stays
    assert pygame.display.get_init() and second.is_open
    second.close()
    assert not pygame.display.get_init()


def test_window_event_backlog_is_bounded():
    window = Window((20, 20))
    window.open()
    for _ in range(2000):
        pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_a))
    window.show(np.zeros((20, 20, 3), np.uint8))
    assert 0 < len(window.events()) <= 512
    window.close()


def test_window_rejects_a_frame_of_the_wrong_shape():
    window = Window((20, 20))
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        window.show(np.zeros((20, 20), np.uint8))
    window.close()
