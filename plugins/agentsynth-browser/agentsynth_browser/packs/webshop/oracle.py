"""Scripted solutions for the webshop pack. They drive the site through its UI (search boxes,
forms, buttons) with CSS/Playwright selectors, as an agent would with element ids."""

SEARCH = "#q"


def t(tool, **arguments):
    return {"tool": tool, "arguments": arguments}


CHECKOUT_DANA = [
    t("click", element="#checkout"),
    t("type", element="#name", text="Dana Reyes"),
    t("type", element="#email", text="dana@example.com"),
    t("type", element="#address", text="12 Pine Road, Boulder CO"),
]

ORACLE = {
    "find-price": [
        t("type", element=SEARCH, text="Summit", submit=True),
        t("click", element="a:has-text('Summit 40L Backpack')"),
        {"answer": "The Summit 40L Backpack costs $129.00."},
    ],
    "order-status": [
        t("click", element="nav a:has-text('Orders')"),
        t("click", element="a:has-text('Order #1003')"),
        t("read", element="#status"),
        {"answer": "Order #1003 has been shipped."},
    ],
    "add-headlamps": [
        t("type", element=SEARCH, text="headlamp", submit=True),
        t("click", element="a:text-is('Trail Headlamp')"),
        t("type", element="#qty", text="2"),
        t("click", element="#add-to-cart"),
        {"answer": "Added 2 Trail Headlamps to the cart."},
    ],
    "cheapest-tent": [
        t("click", element="a:text-is('Tents')"),
        t("select", element="#sort", option="Price: low to high"),
        t("click", element="#instock"),
        t("click", element="#apply"),
        t("click", element="table tr:nth-child(2) a"),
        t("click", element="#add-to-cart"),
        {"answer": "Added the Ridge Dome 2 Tent, the cheapest tent in stock."},
    ],
    "backpack-under-60": [
        t("click", element="a:text-is('Backpacks')"),
        t("select", element="#sort", option="price_desc"),
        t("click", element="#apply"),
        t("click", element="a:has-text('Daytripper 22L Pack')"),
        t("click", element="#add-to-cart"),
        {"answer": "Added the Daytripper 22L Pack ($59.00)."},
    ],
    "fix-cart": [
        t("click", element="button[aria-label='Remove Folding Stool']"),
        t("type", element="input[aria-label='Quantity of Camp Mug']", text="3"),
        t("click", element="tr:has-text('Camp Mug') button:has-text('Update')"),
        {"answer": "Removed the stool and set the mug quantity to 3."},
    ],
    "checkout-express": [
        t("type", element=SEARCH, text="mug", submit=True),
        t("click", element="a:has-text('Camp Mug')"),
        t("click", element="#add-to-cart"),
        *CHECKOUT_DANA,
        t("select", element="#shipping", option="Express (1-2 days) $15.00"),
        t("click", element="#place-order"),
        {"answer": "Ordered one Camp Mug with express shipping."},
    ],
    "coupon-checkout": [
        t("click", element="#cart-link"),
        *CHECKOUT_DANA,
        t("select", element="#shipping", option="standard"),
        t("type", element="#coupon", text="SAVE10"),
        t("click", element="#place-order"),
        {"answer": "Checked out with SAVE10 and standard shipping."},
    ],
    "cancel-order": [
        t("navigate", url="/orders"),
        t("click", element="a:has-text('Order #1001')"),
        t("click", element="#cancel-order"),
        {"answer": "Order #1001 is cancelled."},
    ],
    "support-ticket": [
        t("click", element="nav a:has-text('Support')"),
        t("type", element="#email", text="dana@example.com"),
        t("select", element="#order", option="Order #1002"),
        t("select", element="#topic", option="Damaged item"),
        t("type", element="#message", text="Order #1002 arrived damaged: the handle of the mug was broken."),
        t("click", element="#send"),
        {"answer": "Opened a support ticket about the damaged mug."},
    ],
    "write-review": [
        t("type", element=SEARCH, text="Camp Mug", submit=True),
        t("click", element="a:has-text('Camp Mug')"),
        t("click", element="a:has-text('Write a review')"),
        t("select", element="#rating", option="4"),
        t("type", element="#title", text="Sturdy"),
        t("type", element="#body", text="Keeps coffee hot."),
        t("type", element="#author", text="Dana"),
        t("click", element="#submit-review"),
        {"answer": "Review posted."},
    ],
    "update-account": [
        t("click", element="nav a:has-text('Account')"),
        t("type", element="#acct-address", text="77 Oak Street, Denver CO"),
        t("click", element="#newsletter"),
        t("click", element="#save"),
        {"answer": "Address updated and newsletter unsubscribed."},
    ],
}
