// The trajectory page's Share button: downloads the trajectory as one self-contained HTML page
// (the same page `rollscope share` writes). In such a page, it says what the page is instead.
import { api } from '../api.ts';

export function ShareButton({ id }: { id: string }) {
  const url = api.shareUrl(id);
  if (url)
    return (
      <a
        className="toplink share"
        href={url}
        download
        data-testid="share"
        title="download this trajectory as one HTML file that opens without rollscope (for a bug report)"
      >
        ⤓ Share
      </a>
    );
  return (
    <span className="shared-note small" data-testid="shared-note" title="written by rollscope share">
      shared page{api.sharedAt ? ` · ${api.sharedAt.slice(0, 16).replace('T', ' ')} UTC` : ''} · read-only
    </span>
  );
}
