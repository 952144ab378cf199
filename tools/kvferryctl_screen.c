/* kvferryctl_screen.c: the terminal of the live views (kvferryctl.h, ctl_screen_*): ncurses
 * draws each frame clipped to the window (lines past its last row and columns past its right
 * edge are cut, never wrapped or scrolled), and redraws the frame shown when the window is
 * resized (ncurses turns SIGWINCH into KEY_RESIZE). `q` quits. ncurses restores the terminal
 * on SIGINT and SIGTERM by itself. Single-threaded tool. */
#include <curses.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvferryctl.h"

static SCREEN *scr;
static FILE *keys;  /* the terminal's input: stdin, or /dev/tty (owned) when stdin is not one */
static char *shown; /* owned: the frame on screen, redrawn on a resize */
static size_t shown_len;

int ctl_screen_start(void)
{
    /* keys come from the terminal: with stdin a file or /dev/null, getch would return at once
     * and the wait between frames would spin */
    keys = isatty(STDIN_FILENO) ? stdin : fopen("/dev/tty", "r");
    if (!keys)
        return -1;
    scr = newterm(NULL, stdout, keys);
    if (!scr) {
        if (keys != stdin)
            fclose(keys);
        keys = NULL;
        return -1;
    }
    cbreak();
    noecho();
    nonl();
    curs_set(0);
    keypad(stdscr, TRUE);
    return 0;
}

static void paint(void)
{
    erase();
    const char *p = shown, *end = shown + shown_len;
    for (int y = 0; p && p < end && y < LINES; y++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl ? nl : end) - p);
        mvaddnstr(y, 0, p, (int)(n < (size_t)COLS ? n : (size_t)COLS));
        p = nl ? nl + 1 : end;
    }
    refresh();
}

void ctl_screen_draw(const char *text, size_t len)
{
    char *copy = malloc(len + 1);
    if (!copy)
        return; /* the last frame stays */
    memcpy(copy, text, len);
    copy[len] = '\0';
    free(shown);
    shown = copy;
    shown_len = len;
    paint();
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool ctl_screen_wait(double s)
{
    double end = mono_s() + s;
    for (;;) {
        double left = end - mono_s();
        if (left <= 0)
            return false;
        timeout((int)(left * 1000) + 1);
        int ch = getch();
        if (ch == 'q' || ch == 'Q')
            return true;
        if (ch == KEY_RESIZE)
            paint();
    }
}

void ctl_screen_stop(void)
{
    if (scr) {
        endwin();
        delscreen(scr);
        scr = NULL;
    }
    if (keys && keys != stdin)
        fclose(keys);
    keys = NULL;
    free(shown);
    shown = NULL;
}
