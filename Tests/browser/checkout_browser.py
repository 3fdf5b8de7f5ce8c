"""Drives the web checkout in headless Chromium as a person with a phone would, through Selenium and chromedriver.

Run by CheckoutBrowserTests.swift against a ledger it started, with one argument: a JSON file naming the server, the
accounts (one password for all), the OpenID Connect issuer and the sessions made for each scenario, each with the
address its QR code holds (as read by a real decoder), which is what the browser opens. Each scenario runs on its own;
the failures are written to the JSON file named by "result" as {"passed": [names], "failed": [{"scenario",
"message"}]}, and the exit status is 0 only when every scenario passed.

Every wait is on the page itself (WebDriverWait on the DOM, generous deadlines); nothing sleeps for a fixed time.
"""

import http.client
import json
import os
import re
import sys
import traceback
import urllib.parse

os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager fetch a driver or a browser

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

WAIT = 60  # seconds: a deadline for the page to get somewhere, never a measure of how fast it does


class Failure(Exception):
    """A scenario's expectation that did not hold."""


def expect(condition, message):
    if not condition:
        raise Failure(message)


def money(cents):
    return "$%d.%02d" % (cents // 100, cents % 100)


def axe_source():
    """axe-core's script, as the axe-core-python package ships it (Tests/requirements.txt)."""
    import importlib.resources

    return importlib.resources.files("axe_core_python").joinpath("axe.min.js").read_text(encoding="utf-8")


class Ledger:
    """The server under test, spoken to as the JSON API's clients and as a second browser (raw HTTP) speak to it."""

    def __init__(self, config):
        self.base = config["base"].rstrip("/")
        self.password = config["password"]
        parts = urllib.parse.urlsplit(self.base)
        self.host, self.port = parts.hostname, parts.port

    def request(self, method, path, body=None, headers=None):
        connection = http.client.HTTPConnection(self.host, self.port, timeout=WAIT)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            connection.close()

    def api(self, method, path, payload=None, token=None):
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        body = json.dumps(payload) if payload is not None else None
        status, _, data = self.request(method, path, body, headers)
        expect(200 <= status < 300, "%s %s answered %d: %s" % (method, path, status, data[:300]))
        return json.loads(data) if data else None

    def token(self, email):
        return self.api("POST", "/auth/login", {"email": email, "password": self.password})["token"]

    def balance(self, email):
        wallet = self.api("GET", "/wallet/me", token=self.token(email))
        expect("available_cents" in wallet, "no balance in GET /wallet/me: %r" % wallet)
        return wallet["available_cents"]

    def cancel(self, payee, sid):
        self.api("POST", "/sessions/cancel", {"sid": sid}, token=self.token(payee))

    def pay_as_form(self, email, eid):
        """Pays the session as another browser would: sign in, open the page, post its pay form."""
        form = {"email": email, "password": self.password}
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "text/html"}
        status, fields, _ = self.request("POST", "/p/%s/sign-in" % eid, urllib.parse.urlencode(form), headers)
        expect(status == 303, "the other payer's sign-in answered %d" % status)
        cookie = fields["set-cookie"].split(";", 1)[0]
        status, _, page = self.request("GET", "/p/" + eid, headers={"Cookie": cookie, "Accept": "text/html"})
        expect(status == 200, "the other payer's page answered %d" % status)
        text = page.decode("utf-8")
        hidden = dict(re.findall(r'<input type="hidden" name="([a-z]+)" value="([^"]*)"', text))
        hidden = {name: value.replace("&amp;", "&") for name, value in hidden.items()}
        hidden["tip"] = "0"
        headers["Cookie"] = cookie
        status, fields, _ = self.request("POST", "/p/%s/pay" % eid, urllib.parse.urlencode(hidden), headers)
        expect(status == 303 and "receipt" in fields.get("location", ""), "the other payer's pay answered %d" % status)


class Browser:
    """One headless Chromium at a phone's 360×640, its console kept."""

    def __init__(self, config, javascript=True):
        options = webdriver.ChromeOptions()
        options.binary_location = config["chromium"]
        for argument in (
            "--headless=new",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--disable-gpu",
            "--no-first-run",
            "--window-size=360,640",
            "--lang=en-US",
        ):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        if not javascript:
            options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
        service = Service(executable_path=config["chromedriver"], log_output=config.get("driver_log", os.devnull))
        self.driver = webdriver.Chrome(service=service, options=options)
        # A phone's viewport exactly, whatever the window's frame takes.
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": 360, "height": 640, "deviceScaleFactor": 1, "mobile": True},
        )
        self.console = []

    def quit(self):
        self.driver.quit()

    def wait(self, condition, what):
        try:
            return WebDriverWait(self.driver, WAIT).until(condition)
        except TimeoutException:
            raise Failure("waited %d s for %s; the page is %s: %s" % (WAIT, what, self.driver.current_url, self.text()))

    def text(self):
        try:
            return self.driver.find_element(By.TAG_NAME, "main").text[:500]
        except Exception:
            return self.driver.page_source[:500]

    def element(self, id):
        return self.wait(EC.presence_of_element_located((By.ID, id)), "#" + id)

    def text_of(self, id):
        return self.element(id).text

    def drain_console(self):
        """The console's entries since the last call, also kept in ``console``."""
        entries = self.driver.get_log("browser")
        self.console.extend(entries)
        return entries

    def expect_no_csp_violations(self):
        for entry in self.drain_console():
            message = entry.get("message", "")
            expect(
                "Content Security Policy" not in message and "Refused to" not in message,
                "the console reports a content security policy violation: " + message,
            )

    def open(self, session):
        """Opens the address the session's QR code holds, exactly as it was decoded."""
        self.driver.get(session["url"])

    def sign_in(self, email, password):
        self.wait(EC.element_to_be_clickable((By.ID, "sign-in-button")), "the sign-in form")
        self.driver.find_element(By.ID, "email").send_keys(email)
        self.driver.find_element(By.ID, "password").send_keys(password)
        self.driver.find_element(By.ID, "sign-in-button").click()
        self.wait(EC.presence_of_element_located((By.ID, "pay-button")), "the pay form after signing in")

    def expect_accessible(self, page):
        """axe-core's WCAG 2.1 A and AA and best-practice rules find no violation on the page as it stands (results
        axe cannot decide by itself, "incomplete", are left to a person)."""
        self.driver.execute_script(axe_source())
        result = self.driver.execute_async_script(
            "var done = arguments[arguments.length - 1];"
            " axe.run(document, {runOnly: {type: 'tag', values: arguments[0]}})"
            ".then(function (r) { done({violations: r.violations, passes: r.passes.length}); })"
            ".catch(function (e) { done({error: String(e)}); });",
            ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"],
        )
        expect("error" not in result, "axe-core failed on %s: %s" % (page, result.get("error")))
        expect(result["passes"] > 0, "axe-core checked nothing on %s" % page)
        found = [
            "%s (%s): %s" % (v["id"], v["impact"], ", ".join(" ".join(n["target"]) for n in v["nodes"][:3]))
            for v in result["violations"]
        ]
        expect(not found, "axe-core finds on %s: %s" % (page, "; ".join(found)))

    def expect_receipt(self, sid, cents):
        self.wait(EC.url_contains("/receipt"), "the receipt page")
        expect(self.text_of("outcome") == "Paid", "the receipt page says %r" % self.text_of("outcome"))
        expect(self.text_of("amount") == money(cents), "the receipt shows %r" % self.text_of("amount"))
        # The signed receipt is folded away: a person opens it to read the session it names.
        self.driver.find_element(By.CSS_SELECTOR, "#receipt-details summary").click()
        expect(self.text_of("receipt-session") == sid, "the receipt names session %r" % self.text_of("receipt-session"))


def checkout_page_shows(browser, session, heading):
    expect(browser.text_of("payee") == heading, "the payee reads %r, not %r" % (browser.text_of("payee"), heading))
    expect(browser.text_of("amount") == money(session["cents"]), "the amount reads %r" % browser.text_of("amount"))
    button = browser.text_of("pay-button")
    expect(button == "Pay " + money(session["cents"]), "the button reads %r" % button)
    if "code" in session:
        expect(browser.text_of("code") == session["code"], "the code reads %r" % browser.text_of("code"))


# MARK: The scenarios, in order: the first signs the JavaScript browser in.


def pays(config, ledger, browsers):
    """Open the QR's address at 360×640, sign in, see payee and amount, pay, see the receipt."""
    browser = browsers.js
    session = config["sessions"]["pay"]
    expect(
        session["url"] == "%s/p/%s" % (ledger.base, session["eid"]),
        "the QR code holds %r, not this server's page of the session" % session["url"],
    )
    browser.open(session)
    expect(browser.driver.current_url == session["url"], "the QR's address led to %s" % browser.driver.current_url)
    expect(browser.driver.execute_script("return window.innerWidth") == 360, "the viewport is not 360 px wide")
    browser.sign_in(config["payer"], ledger.password)
    expect(
        browser.driver.current_url.rstrip("/").endswith("/p/" + session["eid"]),
        "sign-in led to %s" % browser.driver.current_url,
    )
    checkout_page_shows(browser, session, 'Pay "Corner Shop"')
    # The page's own script runs: it counts the time left down from what the server wrote.
    written = browser.text_of("time-left")
    browser.wait(lambda d: d.find_element(By.ID, "time-left").text != written, "the countdown to tick")
    browser.driver.execute_script("window.scrollTo(0, 0)")
    png = browser.driver.get_screenshot_as_png()
    expect(png[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is not a PNG")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    expect((width, height) == (360, 640), "the screenshot is %d×%d" % (width, height))
    if config.get("screenshot"):
        with open(config["screenshot"], "wb") as file:
            file.write(png)
    before = ledger.balance(config["payer"])
    browser.driver.find_element(By.ID, "pay-button").click()
    browser.expect_receipt(session["sid"], session["cents"])
    expect('"Corner Shop"' in browser.text_of("paid-to"), "paid to %r" % browser.text_of("paid-to"))
    after = ledger.balance(config["payer"])
    expect(before - after == session["cents"], "the wallet went from %d to %d" % (before, after))
    shown = browser.text_of("balance")
    expect(shown == "Your balance: " + money(after), "the page shows %r" % shown)


def double_click_pays_once(config, ledger, browsers):
    """A double click on Pay: one payment, one receipt."""
    browser = browsers.js
    session = config["sessions"]["double"]
    browser.open(session)
    checkout_page_shows(browser, session, 'Pay "Corner Shop"')
    before = ledger.balance(config["payer"])
    button = browser.wait(EC.element_to_be_clickable((By.ID, "pay-button")), "the pay button")
    ActionChains(browser.driver).double_click(button).perform()
    browser.expect_receipt(session["sid"], session["cents"])
    after = ledger.balance(config["payer"])
    taken = before - after
    expect(taken == session["cents"], "a double click took %d cents, not %d" % (taken, session["cents"]))
    # Back to the page: the payer's own receipt again, not a second payment.
    browser.open(session)
    browser.expect_receipt(session["sid"], session["cents"])
    expect(ledger.balance(config["payer"]) == after, "opening the page again moved money")


def hostile_name_is_text(config, ledger, browsers):
    """A payee named with markup and a bidi override: the page shows the characters, runs nothing, flips nothing."""
    browser = browsers.js
    session = config["sessions"]["hostile"]
    browser.open(session)
    heading = browser.text_of("payee")
    expect("<img src=x onerror=alert(1)>" in heading, "the markup of the name is not shown as text: %r" % heading)
    expect("\u202e" not in heading and "\u202e" not in browser.driver.title, "a bidi override reached the page")
    expect("gpj.exe" in heading, "the name's tail is missing: %r" % heading)
    images = browser.driver.find_elements(By.TAG_NAME, "img")
    expect(not images, "the page holds %d img elements" % len(images))
    try:
        alert = browser.driver.switch_to.alert
        raise Failure("an alert opened: %r" % alert.text)
    except NoAlertPresentException:
        pass
    expect(browser.text_of("amount") == money(session["cents"]), "the amount reads %r" % browser.text_of("amount"))
    before = ledger.balance(config["payer"])
    browser.driver.find_element(By.ID, "pay-button").click()
    browser.expect_receipt(session["sid"], session["cents"])
    paid_to = browser.text_of("paid-to")
    expect("<img src=x onerror=alert(1)>" in paid_to, "the receipt's payee: %r" % paid_to)
    expect(not browser.driver.find_elements(By.TAG_NAME, "img"), "the receipt page holds img elements")
    expect(before - ledger.balance(config["payer"]) == session["cents"], "the hostile payee was not paid once")


def live_status_paid_elsewhere(config, ledger, browsers):
    """The page learns from its event stream that someone else paid, and takes its Pay button away."""
    browser = browsers.js
    session = config["sessions"]["elsewhere"]
    browser.open(session)
    checkout_page_shows(browser, session, 'Pay "Corner Shop"')
    expect(browser.text_of("status") == "", "the status line starts with %r" % browser.text_of("status"))
    ledger.pay_as_form(config["other"], session["eid"])
    browser.wait(
        lambda d: d.find_element(By.ID, "status").text == "This charge has been paid.", "the page to say it was paid"
    )
    browser.wait(EC.invisibility_of_element_located((By.ID, "pay")), "the pay form to go")


def live_status_cancelled(config, ledger, browsers):
    """The page learns from its event stream that the merchant cancelled."""
    browser = browsers.js
    session = config["sessions"]["cancel"]
    browser.open(session)
    checkout_page_shows(browser, session, 'Pay "Corner Shop"')
    ledger.cancel(config["payee"], session["sid"])
    browser.wait(
        lambda d: d.find_element(By.ID, "status").text == "The merchant cancelled this charge.",
        "the page to say it was cancelled",
    )
    browser.wait(EC.invisibility_of_element_located((By.ID, "pay")), "the pay form to go")


def pays_without_javascript(config, ledger, browsers):
    """JavaScript off: sign in and pay with the server's pages alone; a double click still pays once."""
    browser = browsers.plain()
    session = config["sessions"]["nojs"]
    browser.open(session)
    browser.sign_in(config["payer"], ledger.password)
    checkout_page_shows(browser, session, 'Pay "Corner Shop"')
    # No script runs: the countdown the script would tick stays as the server wrote it. (A bounded look for
    # something that must not happen: a slow machine can only make this pass, never fail.)
    written = browser.text_of("time-left")
    try:
        WebDriverWait(browser.driver, 3).until(lambda d: d.find_element(By.ID, "time-left").text != written)
        raise Failure("a script ran with JavaScript off: the countdown ticked")
    except TimeoutException:
        pass
    # A double click, with no script to hold the second back: two posts of one page view, one payment.
    before = ledger.balance(config["payer"])
    ActionChains(browser.driver).double_click(browser.driver.find_element(By.ID, "pay-button")).perform()
    browser.expect_receipt(session["sid"], session["cents"])
    taken = before - ledger.balance(config["payer"])
    expect(taken == session["cents"], "paying without JavaScript took %d cents, not %d" % (taken, session["cents"]))


def the_console_sees_csp(config, ledger, browsers):
    """The console check can fail: an inline script injected into a page is refused and logged as such."""
    browser = browsers.js
    browser.open(config["sessions"]["pay"])
    browser.element("outcome")
    browser.expect_no_csp_violations()
    browser.driver.execute_script(
        "var s = document.createElement('script'); s.textContent = 'document.title = \"ran\"';"
        " document.head.appendChild(s);"
    )

    def refused(driver):
        entries = browser.drain_console()
        return any("Content Security Policy" in e.get("message", "") for e in entries) or None

    browser.wait(refused, "the console to report the refused inline script")
    expect(browser.driver.title != "ran", "an inline script ran despite the content security policy")


def signs_in_through_the_issuer(config, ledger, browsers):
    """A browser new to the ledger: "Sign in with …" goes to the issuer, which sends it back signed in to the same page;
    it pays as the issuer's user."""
    browser = browsers.fresh()
    session = config["sessions"]["issuer"]
    browser.open(session)
    link = browser.wait(EC.element_to_be_clickable((By.ID, "oidc-signin")), "the link to sign in through the issuer")
    host = urllib.parse.urlsplit(config["issuer"]).hostname
    expect(link.text == "Sign in with " + host, "the link reads %r" % link.text)
    link.click()
    # To the issuer, back to the callback, and on to the page by the callback's own navigation.
    browser.wait(EC.presence_of_element_located((By.ID, "pay-button")), "the pay form after the issuer's sign-in")
    expect(browser.driver.current_url == session["url"], "the sign-in ended at %s" % browser.driver.current_url)
    who = browser.driver.find_element(By.CSS_SELECTOR, "#sign-out .who").text
    expect(who == "Signed in as " + config["issuer_user"], "the header reads %r" % who)
    expect(not browser.driver.find_elements(By.ID, "oidc-signin"), "the page still offers the issuer's sign-in")
    checkout_page_shows(browser, session, 'Pay "Corner Shop"')
    browser.driver.find_element(By.ID, "pay-button").click()
    browser.expect_receipt(session["sid"], session["cents"])
    shown = browser.text_of("balance")
    left = config["issuer_funds"] - session["cents"]
    expect(shown == "Your balance: " + money(left), "the receipt page shows %r" % shown)


def pages_are_accessible(config, ledger, browsers):
    """axe-core finds no WCAG 2.1 A/AA or best-practice violation on the sign-in, pay, receipt, cancelled and unknown
    pages at 360×640, and the keyboard reaches the sign-in form's fields in reading order."""
    browser = browsers.fresh()
    session = config["sessions"]["a11y"]
    browser.open(session)
    browser.wait(EC.element_to_be_clickable((By.ID, "sign-in-button")), "the sign-in form")
    expect(browser.driver.find_element(By.TAG_NAME, "html").get_attribute("lang"), "the page has no lang")
    browser.expect_accessible("the sign-in page")
    # From the top of the page, Tab by Tab: e-mail, then password, then the button.
    browser.driver.execute_script("document.activeElement && document.activeElement.blur()")
    focused = []
    for _ in range(12):
        ActionChains(browser.driver).send_keys(Keys.TAB).perform()
        focused.append(browser.driver.switch_to.active_element.get_attribute("id") or "")
    order = [name for name in focused if name in ("email", "password", "sign-in-button")]
    expect(order[:3] == ["email", "password", "sign-in-button"], "Tab reaches the sign-in form as %r" % focused)
    browser.sign_in(config["other"], ledger.password)
    checkout_page_shows(browser, session, 'Pay "Corner Shop"')
    browser.expect_accessible("the pay page")
    # The JavaScript browser is signed in as the payer of "pay" (its receipt) and saw "cancel" cancelled.
    browser = browsers.js
    browser.open(config["sessions"]["pay"])
    browser.expect_receipt(config["sessions"]["pay"]["sid"], config["sessions"]["pay"]["cents"])
    browser.expect_accessible("the receipt page")
    browser.open(config["sessions"]["cancel"])
    browser.element("outcome")
    browser.expect_accessible("the cancelled page")
    browser.driver.get("%s/p/%s" % (ledger.base, "0" * len(session["eid"])))
    browser.element("outcome")
    browser.expect_accessible("the unknown code's page")


SCENARIOS = [
    pays,
    double_click_pays_once,
    hostile_name_is_text,
    live_status_paid_elsewhere,
    live_status_cancelled,
    pays_without_javascript,
    the_console_sees_csp,
    signs_in_through_the_issuer,
    pages_are_accessible,
]


class Browsers:
    """The JavaScript browser, shared by the scenarios in turn, and others started on demand: one without JavaScript,
    and fresh ones with no cookie yet."""

    def __init__(self, config):
        self.config = config
        self.js = Browser(config)
        self.started = [self.js]

    def plain(self):
        browser = Browser(self.config, javascript=False)
        self.started.append(browser)
        return browser

    def fresh(self):
        browser = Browser(self.config)
        self.started.append(browser)
        return browser

    def quit(self):
        for browser in self.started:
            try:
                browser.quit()
            except Exception:
                pass


def main():
    with open(sys.argv[1], encoding="utf-8") as file:
        config = json.load(file)
    ledger = Ledger(config)
    passed, failed = [], []
    browsers = Browsers(config)
    try:
        for scenario in SCENARIOS:
            name = scenario.__name__
            try:
                scenario(config, ledger, browsers)
                # Every page the scenario showed, in every browser: no content security policy violation.
                if scenario is not the_console_sees_csp:
                    for browser in browsers.started:
                        browser.expect_no_csp_violations()
                passed.append(name)
            except Failure as failure:
                failed.append({"scenario": name, "message": str(failure)})
            except Exception:
                failed.append({"scenario": name, "message": traceback.format_exc(limit=4)})
    finally:
        browsers.quit()
    with open(config["result"], "w", encoding="utf-8") as file:
        json.dump({"passed": passed, "failed": failed}, file)
    sys.exit(0 if not failed else 1)


if __name__ == "__main__":
    main()
