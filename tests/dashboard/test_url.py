"""The view in the URL's query string: what a link writes is what opening it reads, and what cannot be read is
left out rather than guessed."""
from viewer.dashboard.callbacks_url import href, parse


def test_a_view_survives_its_url():
    search = href("run2", "timeline", step=None, ranks=[5, 3], window=[1_818_365_345, 1_919_979_738])
    assert search == "?run=run2&page=timeline&ranks=3,5&window=1818365345_1919979738"
    assert parse(search) == {"run": "run2", "page": "timeline", "step": None, "ranks": [3, 5],
                             "window": [1_818_365_345, 1_919_979_738]}
    assert parse(href("run1", "overview", step=2))["step"] == 2


def test_an_unreadable_url_opens_the_default_view():
    assert parse("?step=two&ranks=a,b&window=1-2-3") == {"run": None, "page": None, "step": None, "ranks": None,
                                                          "window": None}
    assert parse("") == parse(None) == {"run": None, "page": None, "step": None, "ranks": None, "window": None}
