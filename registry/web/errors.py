"""Errors of the web pages, in the registry's tree (same codes, same HTTP statuses).

UnauthorizedError (registry.errors)
└── SignInRequired         unauthorized  401   no token, or one that is no longer valid:
                                               a GET goes to the sign-in page instead
ForbiddenError (registry.errors)
└── CsrfError              forbidden     403   a form without the page's CSRF token, or
                                               posted from another origin
BadRequestError (registry.errors)
└── FormError              bad_request   400   a body that is not a form
"""

from __future__ import annotations

from registry.errors import BadRequestError, ForbiddenError, UnauthorizedError


class SignInRequired(UnauthorizedError):
    """The page needs a signed-in user."""


class CsrfError(ForbiddenError):
    """A state-changing form that did not come from one of this registry's pages."""


class FormError(BadRequestError):
    """A POST body that is not an ``application/x-www-form-urlencoded`` form."""
