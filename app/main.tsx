import { StrictMode, useEffect } from 'react';
import { createRoot } from 'react-dom/client';
import { usePage, useRoute } from './stores/route.ts';
import { useLoadInfo, useRunLoading } from './stores/run.ts';
import { Overview } from './components/Overview.tsx';
import { openTrajectory, TrajectoryPage } from './components/TrajectoryPage.tsx';
import { PlaygroundPage } from './components/PlaygroundPage.tsx';
import { ComparePage } from './components/CompareView.tsx';
import { RunPage } from './components/RunPage.tsx';
import { AgainstPage } from './components/AgainstPage.tsx';
import { installKeyboard } from './keyboard.ts';
import './styles.css';

installKeyboard();

// A link to a trajectory: its data is asked for now, while React renders the page the first time.
const first = useRoute.getState();
if (first.page === 'trajectory' && first.id !== null) openTrajectory(first.id, first.params);

function App() {
  const page = usePage();
  const loadInfo = useLoadInfo();
  const loading = useRunLoading();
  useEffect(() => {
    void loadInfo();
  }, [loadInfo]);
  // Refresh the counts: every second while the server is still checking files, then every few
  // seconds (a run still being written grows; the views reload when the count changes).
  useEffect(() => {
    const t = setInterval(() => void loadInfo(), loading ? 1000 : 3000);
    return () => clearInterval(t);
  }, [loading, loadInfo]);
  if (page === 'compare') return <ComparePage />;
  if (page === 'run') return <RunPage />;
  if (page === 'against') return <AgainstPage />;
  return page === 'trajectory' ? <TrajectoryPage /> : page === 'playground' ? <PlaygroundPage /> : <Overview />;
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
